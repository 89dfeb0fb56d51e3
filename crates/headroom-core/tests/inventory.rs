//! The layer inventory and the step timeline through the public surface: a share link is the
//! fixture, `estimate` runs on it, and the rendering is compared with `expect-test` snapshots
//! (`UPDATE_EXPECT=1 cargo test -p headroom-core --test suite inventory::` rewrites them), so a change
//! to a formula shows in review as the tensors and points it moves.
//!
//! The configs are the small ones of `tests/reference` (llama: hidden 192, intermediate 512,
//! 6 heads, 2 kv heads; gpt2: n_embd 192, 6 heads; vocab 3000), batch 2, sequence 64, so the
//! per-layer totals are the bytes measured from real transformers code there (`measured.rs`).

use expect_test::{Expect, expect};
use headroom_core::{codec, estimate};

const LLAMA: &str = "v=1&cfg=attention_bias:false~attention_dropout:0.0~head_dim:32~hidden_act:silu~hidden_size:192~intermediate_size:512~max_position_embeddings:2048~mlp_bias:false~model_type:llama~num_attention_heads:6~num_hidden_layers:4~num_key_value_heads:2~tie_word_embeddings:false~vocab_size:3000&batch=2&seq=64";
const GPT2: &str = "v=1&cfg=activation_function:gelu_new~attn_pdrop:0.0~embd_pdrop:0.0~model_type:gpt2~n_embd:192~n_head:6~n_inner:768~n_layer:4~n_positions:1024~resid_pdrop:0.0~tie_word_embeddings:true~vocab_size:3000&batch=2&seq=64";

/// One saved tensor per line (elements x dtype x copies = bytes), then the layer's total.
fn inventory(link: &str) -> String {
    let scen = codec::decode(link).expect("the fixture link decodes");
    let e = estimate(&scen).expect("the fixture estimates");
    let mut out = String::new();
    for s in &e.layer_inventory {
        let copies = if s.copies > 1 {
            format!(" x{}", s.copies)
        } else {
            String::new()
        };
        let dtype = format!("{:?}{copies}", s.dtype).to_lowercase();
        out += &format!(
            "{:>9} {dtype:<7} = {:>9}  {}\n",
            s.elements,
            s.bytes(),
            s.what
        );
    }
    out += &format!("total {} B\n", e.bytes.activations_per_layer);
    out
}

/// Every timeline point's phase, label and live tensor bytes; the peak marked.
fn timeline(link: &str) -> String {
    let scen = codec::decode(link).expect("the fixture link decodes");
    let e = estimate(&scen).expect("the fixture estimates");
    let mut out = String::new();
    let mut peak_marked = false;
    for p in &e.timeline {
        let mark = if !peak_marked && p.tensors == e.peak.tensors {
            peak_marked = true;
            "  <- peak"
        } else {
            ""
        };
        out += &format!(
            "{:<14} {:>10}  {}{mark}\n",
            p.phase.label(),
            p.tensors,
            p.label
        );
    }
    out
}

#[track_caller]
fn check_inventory(link: &str, expect: Expect) {
    expect.assert_eq(&inventory(link));
}

#[track_caller]
fn check_timeline(link: &str, expect: Expect) {
    expect.assert_eq(&timeline(link));
}

#[test]
#[cfg_attr(not(feature = "inventory-text"), ignore = "snapshots the labels")]
fn llama_bf16_sdpa_inventory() {
    check_inventory(
        &format!("{LLAMA}&precision=bf16"),
        expect![[r#"
                24576 f32     =     98304  input_layernorm: fp32 copy of the input (saved by pow, mul)
                  128 f32     =       512  input_layernorm: rsqrt of the variance
                24576 bf16    =     49152  input_layernorm: normalized input (saved by mul with weight)
                24576 bf16    =     49152  q/k/v_proj input (saved by the Linear)
                24576 bf16    =     49152  q after RoPE (saved by SDPA)
                 8192 bf16    =     16384  k after RoPE (saved by SDPA)
                 8192 bf16    =     16384  v (saved by SDPA)
                24576 bf16    =     49152  attention output (saved by SDPA)
                  768 f32     =      3072  logsumexp (saved by SDPA)
                    2 i64     =        16  RNG state: philox seed and offset (saved by SDPA)
                24576 f32     =     98304  post_attention_layernorm: fp32 copy of the input (saved by pow, mul)
                  128 f32     =       512  post_attention_layernorm: rsqrt of the variance
                24576 bf16    =     49152  post_attention_layernorm: normalized input (saved by mul with weight)
                24576 bf16    =     49152  gate/up_proj input (saved by the Linear)
                65536 bf16    =    131072  gate output (saved by the activation)
                65536 bf16    =    131072  up output (saved by the product)
                65536 bf16    =    131072  activation output (saved by the product)
                65536 bf16    =    131072  product act(gate) * up (saved by down_proj)
            total 1052688 B
        "#]],
    );
}

#[test]
#[cfg_attr(not(feature = "inventory-text"), ignore = "snapshots the labels")]
fn llama_fp32_eager_inventory() {
    check_inventory(
        &format!("{LLAMA}&precision=fp32&attention=eager"),
        expect![[r#"
                24576 f32     =     98304  input_layernorm: input (saved by pow, mul)
                  128 f32     =       512  input_layernorm: rsqrt of the variance
                24576 f32     =     98304  input_layernorm: normalized input (saved by mul with weight)
                24576 f32     =     98304  q/k/v_proj input (saved by the Linear)
                24576 f32     =     98304  q after RoPE (saved by matmul q k^T)
                24576 f32     =     98304  k repeated to all heads (saved by matmul q k^T)
                49152 f32     =    196608  softmax output, fp32 (saved by softmax)
                24576 f32     =     98304  v repeated to all heads (saved by matmul probs v)
                24576 f32     =     98304  o_proj input (contiguous attention output) (saved by the Linear)
                24576 f32     =     98304  post_attention_layernorm: input (saved by pow, mul)
                  128 f32     =       512  post_attention_layernorm: rsqrt of the variance
                24576 f32     =     98304  post_attention_layernorm: normalized input (saved by mul with weight)
                24576 f32     =     98304  gate/up_proj input (saved by the Linear)
                65536 f32     =    262144  gate output (saved by the activation)
                65536 f32     =    262144  up output (saved by the product)
                65536 f32     =    262144  activation output (saved by the product)
                65536 f32     =    262144  product act(gate) * up (saved by down_proj)
            total 2229248 B
        "#]],
    );
}

#[test]
#[cfg_attr(not(feature = "inventory-text"), ignore = "snapshots the labels")]
fn llama_amp_bf16_lora_inventory() {
    check_inventory(
        &format!("{LLAMA}&precision=amp-bf16&method=lora&rank=8&targets=all"),
        expect![[r#"
                24576 f32     =     98304  input_layernorm: fp32 copy of the input (saved by pow, mul)
                  128 f32     =       512  input_layernorm: rsqrt of the variance
                24576 bf16 x3 =    147456  q/k/v_proj input: autocast's bfloat16 copy for lora_A (per adapted Linear)
                 1024 bf16 x3 =      6144  lora_A output (saved by lora_B)
                24576 bf16    =     49152  q after RoPE (saved by SDPA)
                 8192 bf16    =     16384  k after RoPE (saved by SDPA)
                 8192 bf16    =     16384  v (saved by SDPA)
                24576 bf16    =     49152  attention output (saved by SDPA)
                  768 f32     =      3072  logsumexp (saved by SDPA)
                    2 i64     =        16  RNG state: philox seed and offset (saved by SDPA)
                24576 bf16    =     49152  o_proj input (the kernel's output): autocast's bfloat16 copy for lora_A (per adapted Linear)
                 1024 bf16    =      2048  lora_A output (saved by lora_B)
                24576 f32     =     98304  post_attention_layernorm: fp32 copy of the input (saved by pow, mul)
                  128 f32     =       512  post_attention_layernorm: rsqrt of the variance
                24576 bf16 x2 =     98304  gate/up_proj input: autocast's bfloat16 copy for lora_A (per adapted Linear)
                 1024 bf16 x2 =      4096  lora_A output (saved by lora_B)
                65536 bf16    =    131072  gate output (saved by the activation)
                65536 bf16    =    131072  up output (saved by the product)
                65536 bf16    =    131072  activation output (saved by the product)
                65536 bf16    =    131072  down_proj input: autocast's bfloat16 copy for lora_A (per adapted Linear)
                 1024 bf16    =      2048  lora_A output (saved by lora_B)
            total 1165328 B
        "#]],
    );
}

#[test]
#[cfg_attr(not(feature = "inventory-text"), ignore = "snapshots the labels")]
fn gpt2_bf16_sdpa_inventory() {
    check_inventory(
        &format!("{GPT2}&precision=bf16"),
        expect![[r#"
                24576 bf16    =     49152  attention LayerNorm: input (saved by layer_norm)
                  256 f32     =      1024  attention LayerNorm: mean and rstd, fp32
                24576 bf16    =     49152  qkv input (saved by the Linear)
                73728 bf16    =    147456  fused qkv output, kept by the q view (saved by SDPA)
                49152 bf16    =     98304  k and v concatenated into the KV cache (use_cache; saved by SDPA)
                24576 bf16    =     49152  attention output (saved by SDPA)
                  768 f32     =      3072  logsumexp (saved by SDPA)
                    2 i64     =        16  RNG state: philox seed and offset (saved by SDPA)
                24576 bf16    =     49152  MLP LayerNorm: input (saved by layer_norm)
                  256 f32     =      1024  MLP LayerNorm: mean and rstd, fp32
                24576 bf16    =     49152  MLP input (saved by the Linear)
                98304 bf16    =    196608  MLP up output (saved by pow)
                98304 bf16 x3 =    589824  gelu_new: tanh output, 0.5 * x and 1 + tanh (saved by tanh, mul)
                98304 bf16    =    196608  activation output (saved by the down projection)
            total 1479696 B
        "#]],
    );
}

#[test]
#[cfg_attr(not(feature = "inventory-text"), ignore = "snapshots the labels")]
fn gpt2_fp32_eager_dropout_inventory() {
    check_inventory(
        &format!("{GPT2}&precision=fp32&attention=eager&dropout=0.1"),
        expect![[r#"
                24576 f32     =     98304  attention LayerNorm: input (saved by layer_norm)
                  256 f32     =      1024  attention LayerNorm: mean and rstd, fp32
                24576 f32     =     98304  qkv input (saved by the Linear)
                49152 f32     =    196608  q and k (saved by matmul q k^T)
                49152 f32     =    196608  softmax output (saved by softmax)
                49152 bool    =     49152  attention dropout mask (saved by dropout)
                49152 f32     =    196608  dropped probabilities (saved by matmul probs v)
                24576 f32     =     98304  v (saved by matmul probs v)
                24576 f32     =     98304  attention output projection input (saved by the Linear)
                24576 bool    =     24576  residual dropout mask (attention)
                24576 f32     =     98304  MLP LayerNorm: input (saved by layer_norm)
                  256 f32     =      1024  MLP LayerNorm: mean and rstd, fp32
                24576 f32     =     98304  MLP input (saved by the Linear)
                98304 f32     =    393216  MLP up output (saved by pow)
                98304 f32 x3  =   1179648  gelu_new: tanh output, 0.5 * x and 1 + tanh (saved by tanh, mul)
                98304 f32     =    393216  activation output (saved by the down projection)
                24576 bool    =     24576  residual dropout mask (MLP)
            total 3246080 B
        "#]],
    );
}

#[test]
fn llama_bf16_timeline() {
    check_timeline(
        &format!("{LLAMA}&precision=bf16"),
        expect![[r#"
            step start       16361600  step start: weights, optimizer states, inputs
            forward          17767056  layer 1 forward
            forward          17668752  after layer 1
            forward          18819744  layer 2 forward
            forward          18721440  after layer 2
            forward          19872432  layer 3 forward
            forward          19774128  after layer 3
            forward          20925120  layer 4 forward
            forward          20826816  after layer 4
            loss             24619728  logits and loss (fp32 upcast, log_softmax)
            loss             22314696  after loss
            backward         25386688  loss backward (fp32 logit gradients)
            backward         22746816  lm_head backward
            backward         22240832  layer 4 backward
            backward         21516592  after layer 4 backward
            backward         21975344  layer 3 backward
            backward         21251104  after layer 3 backward
            backward         21709856  layer 2 backward
            backward         20985616  after layer 2 backward
            backward         21444368  layer 1 backward
            backward         20720128  after layer 1 backward
            backward         21863936  embedding backward
            backward         21814784  end of backward: all gradients
            optimizer step   27267968  optimizer step  <- peak
            optimizer step   16361600  after zero_grad
        "#]],
    );
}

#[test]
fn llama_amp_bf16_full_checkpointing_timeline() {
    check_timeline(
        &format!("{LLAMA}&precision=amp-bf16&ckpt=full"),
        expect![[r#"
            step start       32721152  step start: weights, optimizer states, inputs
            forward          33406724  layer 1 forward
            forward          33868544  after layer 1
            forward          34291460  layer 2 forward
            forward          34753280  after layer 2
            forward          35176196  layer 3 forward
            forward          35638016  after layer 3
            forward          36060932  layer 4 forward
            forward          36522752  after layer 4
            loss             41615120  logits and loss (fp32 upcast, log_softmax)
            loss             36066056  after loss
            backward         39138048  loss backward (fp32 logit gradients)
            backward         38802176  lm_head backward
            backward         37979152  layer 4 backward
            backward         37009920  after layer 4 backward
            backward         39455248  layer 3 backward
            backward         38486016  after layer 3 backward
            backward         40931344  layer 2 backward
            backward         39962112  after layer 2 backward
            backward         42407440  layer 1 backward
            backward         41438208  after layer 1 backward
            backward         43725824  embedding backward
            backward         43627520  end of backward: all gradients
            optimizer step   54533888  optimizer step  <- peak
            optimizer step   32721152  after zero_grad
        "#]],
    );
}

#[test]
fn llama_bf16_accumulation_timeline() {
    check_timeline(
        &format!("{LLAMA}&precision=bf16&accum=2&keep_logits=1"),
        expect![[r#"
            step start       16361600  step start: weights, optimizer states, inputs
            forward          17767056  layer 1 forward
            forward          17668752  after layer 1
            forward          18819744  layer 2 forward
            forward          18721440  after layer 2
            forward          19872432  layer 3 forward
            forward          19774128  after layer 3
            forward          20925120  layer 4 forward
            forward          20826816  after layer 4
            loss             24619728  logits and loss (fp32 upcast, log_softmax)
            loss             23082696  after loss
            backward         26154688  loss backward (fp32 logit gradients)
            backward         23514816  lm_head backward
            backward         23008832  layer 4 backward
            backward         22317360  after layer 4 backward
            backward         22776112  layer 3 backward
            backward         22084640  after layer 3 backward
            backward         22543392  layer 2 backward
            backward         21851920  after layer 2 backward
            backward         22310672  layer 1 backward
            backward         21619200  after layer 1 backward
            backward         22763008  embedding backward
            backward         22713856  end of backward: all gradients
            forward          23220240  next micro-batches: layer 1 forward
            forward          23121936  next micro-batches: after layer 1
            forward          24272928  next micro-batches: layer 2 forward
            forward          24174624  next micro-batches: after layer 2
            forward          25325616  next micro-batches: layer 3 forward
            forward          25227312  next micro-batches: after layer 3
            forward          26378304  next micro-batches: layer 4 forward
            forward          26280000  next micro-batches: after layer 4
            loss             30072912  next micro-batches: logits and loss (fp32 upcast, log_softmax)
            loss             28535880  next micro-batches: after loss
            backward         31607872  next micro-batches: loss backward (fp32 logit gradients)  <- peak
            backward         28968000  next micro-batches: lm_head backward
            backward         27309632  next micro-batches: layer 4 backward
            backward         25830960  next micro-batches: after layer 4 backward
            backward         26289712  next micro-batches: layer 3 backward
            backward         24811040  next micro-batches: after layer 3 backward
            backward         25269792  next micro-batches: layer 2 backward
            backward         23791120  next micro-batches: after layer 2 backward
            backward         24249872  next micro-batches: layer 1 backward
            backward         22771200  next micro-batches: after layer 1 backward
            backward         22763008  next micro-batches: embedding backward
            backward         22713856  next micro-batches: end of backward: all gradients
            optimizer step   28167040  optimizer step
            optimizer step   16361600  after zero_grad
        "#]],
    );
}

/// The labels are display text only: without `inventory-text` (the site's first download) every
/// row is there with its bytes and no label; with it every row is named.
#[test]
fn every_row_is_labelled_exactly_when_the_labels_are_built_in() {
    let scen = codec::decode(LLAMA).expect("the fixture link decodes");
    let e = estimate(&scen).expect("the fixture estimates");
    assert!(!e.layer_inventory.is_empty());
    let built_in = cfg!(feature = "inventory-text");
    assert!(
        e.layer_inventory
            .iter()
            .all(|s| s.what.is_empty() != built_in)
    );
}
