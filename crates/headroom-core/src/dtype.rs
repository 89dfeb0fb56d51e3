//! Element types of tensors and their sizes in bytes.

use serde::{Deserialize, Serialize};

/// An element type as PyTorch stores it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    F32,
    Bf16,
    F16,
    F8,
    I64,
    I32,
    I8,
    U8,
    Bool,
}

impl DType {
    /// Bytes per element.
    pub const fn bytes(self) -> u64 {
        match self {
            DType::F32 | DType::I32 => 4,
            DType::Bf16 | DType::F16 => 2,
            DType::F8 | DType::I8 | DType::U8 | DType::Bool => 1,
            DType::I64 => 8,
        }
    }

    /// PyTorch's name, used in formulas shown to people.
    pub const fn torch_name(self) -> &'static str {
        match self {
            DType::F32 => "float32",
            DType::Bf16 => "bfloat16",
            DType::F16 => "float16",
            DType::F8 => "float8_e4m3fn",
            DType::I64 => "int64",
            DType::I32 => "int32",
            DType::I8 => "int8",
            DType::U8 => "uint8",
            DType::Bool => "bool",
        }
    }
}
