//! Models: the normalized spec, Hugging Face config parsing and the parameter inventory.

pub mod classes;
pub mod hf;
pub mod limits;
pub mod params;
pub mod spec;

pub use hf::{from_config_value, parse_config_json, supported_model_types};
pub use params::{ParamInventory, ParamTensor, Scope, inventory};
pub use spec::{
    Dropout, Family, LinearAttention, Llama4, Mla, MlpKind, ModelSpec, Moe, NormKind, Router,
    VISION_IMAGE_PX, Vision, VisionKind,
};
