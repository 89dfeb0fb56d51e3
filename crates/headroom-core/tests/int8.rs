//! LoRA on an 8-bit base (`method=lora8`, bitsandbytes' LLM.int8) against what bitsandbytes'
//! code stores and keeps: `Int8Params` (int8 codes, one fp32 scale per output row) and
//! `MatMul8bitLt`, whose context keeps each input that needs a gradient (`ctx.tensors`) outside
//! the saved-tensor hooks, so checkpointing keeps it too. The bytes themselves are checked
//! against bitsandbytes and peft on CPU in tests/reference/test_peft.py.

use headroom_core::codec::decode;
use headroom_core::estimate;
use headroom_core::estimate::Estimate;

/// Llama 3.1 8B (hidden 4096, intermediate 14336, 32 layers), 4 x 2048 tokens, bf16, adapters
/// on every Linear in fp32 (peft's default, and what it keeps for an 8-bit base).
const BASE: &str =
    "model=llama-3.1-8b&gpu=h100-sxm-80gb&precision=bf16&batch=4&seq=2048&targets=all";

fn est(link: &str) -> Estimate {
    estimate(&decode(link).expect("decodes")).expect("estimates")
}

/// The message refusing `link`, whether the link's own check or the estimate's refuses it.
fn refusal(link: &str) -> String {
    match decode(link).map(|s| estimate(&s)) {
        Ok(Ok(_)) => panic!("{link} was estimated"),
        Ok(Err(e)) | Err(e) => e.to_string(),
    }
}

/// Weights: every decoder-layer Linear as int8 codes plus an fp32 scale per output row; the
/// embeddings, norms and lm_head as 16-bit LoRA keeps them.
#[test]
fn the_weights_are_int8_codes_and_row_scales() {
    let lora16 = est(&format!("{BASE}&method=lora&adapter=bf16"));
    let int8 = est(&format!("{BASE}&method=lora8"));
    let lora32 = est(&format!("{BASE}&method=lora"));
    let (h, i, kv, layers) = (4096u64, 14336u64, 1024u64, 32u64);
    // q, k, v, o, gate, up, down: (inputs x outputs) each.
    let linears = [(h, h), (h, kv), (h, kv), (h, h), (h, i), (h, i), (i, h)];
    let numel: u64 = linears.iter().map(|(a, b)| a * b).sum::<u64>() * layers;
    let rows: u64 = linears.iter().map(|(_, b)| b).sum::<u64>() * layers;
    // The 16-bit base minus its Linears at 2 B, plus int8 codes and fp32 row scales; the
    // adapters in fp32 either way (peft keeps an 8-bit base's adapters in fp32).
    assert_eq!(
        int8.bytes.weights,
        lora32.bytes.weights - 2 * numel + numel + 4 * rows
    );
    assert!(lora16.bytes.weights < lora32.bytes.weights);
}

/// Without checkpointing a 16-bit LoRA layer with adapters everywhere already saves the
/// inputs of q/k/v, gate/up and down (lora_A keeps each), and attention keeps its output
/// (o_proj's input): an 8-bit layer keeps the same tensors. With full checkpointing a 16-bit
/// layer keeps only its input; an 8-bit layer keeps those four inputs as well:
/// (3 x hidden + intermediate) x 2 B per token, every layer, through the whole backward.
#[test]
fn checkpointing_does_not_drop_the_held_inputs() {
    let int8 = est(&format!("{BASE}&method=lora8"));
    let lora32 = est(&format!("{BASE}&method=lora"));
    let tokens = 4 * 2048u64;
    let held = tokens * (3 * 4096 + 14336) * 2;
    // With fp32 adapters lora_A saves a cast copy, not x: the held x adds to its layer.
    assert!(int8.bytes.activations_per_layer > lora32.bytes.activations_per_layer);
    let ckpt = |m: &str| est(&format!("{BASE}&method={m}&ckpt=full"));
    let (l16, l8) = (ckpt("lora"), ckpt("lora8"));
    let grown = l8.bytes.retained_after_forward - l16.bytes.retained_after_forward;
    assert_eq!(grown, 32 * held);
}

/// What a replicated 8-bit base cannot run, or what is not modelled for it, is refused by name.
#[test]
fn what_an_8bit_base_does_not_run_is_named() {
    let m = "model=llama-3.1-8b&gpu=h100-sxm-80gb&method=lora8";
    assert!(refusal(&format!("{m}&gpus=2&dp=fsdp")).contains("dp"));
    assert!(refusal(&format!("{m}&adapter=bf16")).contains("adapter"));
    assert!(refusal(&format!("{m}&compile=1")).contains("compile"));
    assert!(refusal(&format!("{m}&act_offload=1")).contains("act_offload"));
    let moe = "model=mixtral-8x7b&gpu=h100-sxm-80gb&method=lora8";
    assert!(refusal(moe).contains("MoE"));
}
