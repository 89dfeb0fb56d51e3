//! Context parallelism (`cp`) and sequence packing (`packing`, `doc_len`): memory per GPU at
//! seq/cp, the ring's traffic, packing's attention FLOPs, validation, links and exports,
//! against figures from the settings' sources.

use headroom_core::codec::{decode, encode};
use headroom_core::estimate::resolve;
use headroom_core::export::{Target, export, not_expressed, offered};
use headroom_core::time::token_flops;
use headroom_core::{Estimate, ScenarioError, analyze, estimate};

fn scen(query: &str) -> headroom_core::Scenario {
    decode(query).unwrap_or_else(|e| panic!("{query}: {e}"))
}

fn est(query: &str) -> Estimate {
    estimate(&scen(query)).unwrap_or_else(|e| panic!("{query}: {e}"))
}

fn component(e: &Estimate, id: &str) -> u64 {
    e.components
        .iter()
        .find(|c| c.id == id)
        .map_or(0, |c| c.bytes)
}

#[track_caller]
fn refused(query: &str, field: &str, words: &str) {
    match estimate(&scen(query)) {
        Err(ScenarioError::Invalid { field: f, message }) => {
            assert_eq!(f, field, "{query}: {message}");
            assert!(message.contains(words), "{query}: {message}");
        }
        other => panic!("{query}: expected a refusal naming {field}, got {other:?}"),
    }
}

#[track_caller]
fn invalid(query: &str, field: &str, words: &str) {
    match decode(query).map(|s| s.validate()) {
        Ok(Err(ScenarioError::Invalid { field: f, message }))
        | Err(ScenarioError::Invalid { field: f, message }) => {
            assert_eq!(f, field, "{query}: {message}");
            assert!(message.contains(words), "{query}: {message}");
        }
        other => panic!("{query}: expected a refusal naming {field}, got {other:?}"),
    }
}

const LONG: &str = "model=llama-3.1-8b&gpu=h100-sxm-80gb&batch=1&dp=fsdp&precision=bf16";

/// Ring attention gives each rank seq/cp tokens of every sequence (PyTorch `context_parallel`,
/// Megatron-LM `--context-parallel-size`): one decoder layer's saved tensors, the attention
/// core's, the logits and the loss are exactly those of a run at seq/cp without CP.
#[test]
fn activations_per_gpu_are_those_of_seq_over_cp() {
    let cp = est(&format!("{LONG}&gpus=8&seq=32768&cp=4"));
    let short = est(&format!("{LONG}&gpus=8&seq=8192"));
    assert_eq!(
        cp.bytes.activations_per_layer,
        short.bytes.activations_per_layer
    );
    assert_eq!(
        cp.bytes.attention_core_per_layer,
        short.bytes.attention_core_per_layer
    );
    assert_eq!(component(&cp, "logits"), component(&short, "logits"));
    assert_eq!(component(&cp, "inputs"), component(&short, "inputs"));
    // Llama 3.1 8B at 8192 tokens: 8192 x 128256 bf16 logits.
    assert_eq!(component(&cp, "logits"), 8192 * 128_256 * 2);
    // FSDP shards over dp x cp = 2 x 4 = 8 ranks (torchtitan's dp_shard_cp mesh): the
    // weights, gradients and optimizer states per GPU are those of 8-way FSDP.
    assert_eq!(cp.bytes.weights, short.bytes.weights);
    assert_eq!(cp.bytes.gradients, short.bytes.gradients);
    assert_eq!(cp.bytes.optimizer_states, short.bytes.optimizer_states);
    // What the ring adds in backward: two bf16 key/value chunks and two fp32 gradient chunks
    // of 8192 tokens x 2048 (Llama 3.1 8B's 8 KV heads x 128, twice) on top of one layer's
    // backward peak.
    assert_eq!(
        component(&cp, "layer_backward") - component(&short, "layer_backward"),
        6 * 8192 * 2048 * 2
    );
    assert!(cp.peak.tensors >= short.peak.tensors);
    assert!(cp.context.contains("cp = 4"), "{}", cp.context);
}

/// The ring's chunk for Llama 3.1 8B (config.json: 8 KV heads x head_dim 128 = 1024 key and
/// 1024 value widths) at 32768 tokens over cp = 4, micro-batch 1, bf16: 8192 tokens x 2048 x
/// 2 bytes = 32 MiB; two in flight in forward, and in backward the two again plus two fp32
/// gradient chunks.
#[test]
fn ring_chunks_in_flight() {
    let s = scen(&format!("{LONG}&gpus=8&seq=32768&cp=4"));
    let r = resolve(&s).expect("resolves");
    let chunk = 8192 * 2048 * 2;
    assert_eq!(headroom_core::context::kv_chunk_bytes(&r.spec, &s), chunk);
    assert_eq!(
        headroom_core::context::forward_bytes(&r.spec, &s),
        2 * chunk
    );
    assert_eq!(
        headroom_core::context::backward_bytes(&r.spec, &s),
        2 * chunk + 4 * chunk
    );
    // Off: nothing.
    let off = scen(&format!("{LONG}&gpus=8&seq=32768"));
    assert_eq!(headroom_core::context::kv_chunk_bytes(&r.spec, &off), 0);
}

/// The time model: per GPU, seq/cp tokens with attention over the whole sequence, so the
/// step's FLOPs per GPU are those of the whole step over tp·pp·cp; the ring moves (cp − 1)
/// chunks per layer in forward and twice that in backward; the global batch is
/// micro-batch x accumulation x gpus/(tp·pp·cp) sequences.
#[test]
fn time_model_splits_tokens_and_times_the_ring() {
    let a = analyze(&scen(&format!("{LONG}&gpus=8&seq=32768&cp=4"))).expect("analyzes");
    let one = analyze(&scen(&format!("{LONG}&gpus=2&seq=32768"))).expect("analyzes");
    // The same two sequences per step: on 2 GPUs without CP, on 8 with cp = 4.
    assert_eq!(a.time.tokens_per_step, 2 * 32768);
    assert_eq!(one.time.tokens_per_step, 2 * 32768);
    let rel = a.time.model_flops_per_gpu * 4.0 / one.time.model_flops_per_gpu;
    assert!((rel - 1.0).abs() < 1e-12, "model FLOPs per GPU x cp: {rel}");
    let ring = a.time.term("context_parallel").expect("a ring term");
    // 3 chunks (forward 1 + backward 2) x (cp − 1) = 3 sends x 32 layers x 32 MiB.
    assert_eq!(ring.bytes, 3 * 3 * 32 * 8192 * 2048 * 2);
    assert!(ring.exposed_seconds <= ring.seconds);
    assert!(one.time.term("context_parallel").is_none());
}

/// Packing (transformers' DataCollatorWithFlattening with flash varlen): a causal document of
/// L tokens costs L²/2 query-key products instead of s²/2 per row of s tokens; a row holds
/// s/L documents, so attention's FLOPs are L/s of an unpacked row's, exactly. Nothing else
/// changes, and memory does not (no padding, which the estimate assumes anyway).
#[test]
fn packing_scales_attention_flops_by_doc_len_over_seq() {
    let base = "model=llama-3.1-8b&gpu=h100-sxm-80gb&seq=8192&attention=flash2";
    let plain = scen(base);
    let packed = scen(&format!("{base}&packing=1&doc_len=1024"));
    let r = resolve(&plain).expect("resolves");
    let f0 = token_flops(&r.spec, r.gpu, &plain);
    let f1 = token_flops(&r.spec, r.gpu, &packed);
    let ratio = f1.attention_causal_forward / f0.attention_causal_forward;
    assert!((ratio - 1024.0 / 8192.0).abs() < 1e-15, "{ratio}");
    assert!(
        (f1.attention_backward / f0.attention_backward - 0.125).abs() < 1e-15,
        "backward too"
    );
    assert_eq!(f1.layer_matmul_forward, f0.layer_matmul_forward);
    let (e0, e1) = (
        estimate(&plain).expect("ok"),
        estimate(&packed).expect("ok"),
    );
    assert_eq!(e0.bytes, e1.bytes);
    assert!(e0.context.is_empty());
    assert!(e1.context.contains("memory unchanged"), "{}", e1.context);
    // A document longer than the row is cut at the row.
    let long = scen(&format!("{base}&packing=1&doc_len=100000"));
    let f2 = token_flops(&r.spec, r.gpu, &long);
    assert_eq!(f2.attention_causal_forward, f0.attention_causal_forward);
}

#[test]
fn refusals_name_the_field() {
    invalid(
        "gpus=6&cp=4",
        "gpus",
        "must be a multiple of tp x pp x cp = 4",
    );
    invalid("gpus=4&cp=4&seq=4100", "seq", "multiple of 8");
    invalid("gpus=2&cp=2&attention=eager", "cp", "choose attention sdpa");
    invalid(
        "gpus=2&cp=2&attention=flash2",
        "cp",
        "choose attention sdpa",
    );
    invalid("gpus=2&cp=2&sdpa=math", "cp", "math kernel");
    invalid("cp=0", "cp", "from 1 to 1024");
    invalid("packing=1", "packing", "4D block-diagonal mask");
    invalid(
        "packing=1&attention=eager",
        "packing",
        "choose attention flash2",
    );
    invalid("packing=1&attention=flash2&doc_len=0", "doc_len", "from 1");
    // Gemma 2's sliding window (4096 tokens, config.json) has no ring version.
    refused(
        "model=gemma-2-9b&gpus=2&cp=2&seq=8192",
        "cp",
        "sliding-window",
    );
}

/// Defaults write nothing: cp = 1, packing off and the default doc_len leave a link as it was;
/// set, they round-trip (doc_len only with packing on).
#[test]
fn links_carry_the_settings_only_when_set() {
    let d = encode(&headroom_core::Scenario::default());
    assert!(!d.contains("cp=") && !d.contains("packing") && !d.contains("doc_len"));
    let s = scen("gpus=8&seq=32768&cp=4");
    let link = encode(&s);
    assert!(link.contains("cp=4"), "{link}");
    assert_eq!(decode(&link).expect("ok"), s);
    let p = scen("attention=flash2&packing=1&doc_len=700");
    let link = encode(&p);
    assert!(
        link.contains("packing=1") && link.contains("doc_len=700"),
        "{link}"
    );
    assert_eq!(decode(&link).expect("ok"), p);
    // doc_len alone (packing off) is not written.
    let off = scen("doc_len=700");
    assert!(!encode(&off).contains("doc_len"));
}

/// No export writes context parallelism (the env file is about the process, and says nothing
/// of it); packing is written by the Trainer script and the FSDP2 script with
/// DataCollatorWithFlattening, and refused by the others with the reason.
#[test]
fn exports() {
    let s = scen(&format!("{LONG}&gpus=8&seq=32768&cp=4"));
    assert_eq!(offered(&s), vec![Target::Env]);
    let why = not_expressed(&s, Target::Fsdp2).expect("refused");
    assert!(why.contains("context_parallel"), "{why}");

    let p = scen("model=llama-3.1-8b&gpus=8&dp=fsdp&attention=flash2&packing=1&doc_len=2048");
    let targets = offered(&p);
    assert!(targets.contains(&Target::Trainer) && targets.contains(&Target::Fsdp2));
    assert!(!targets.contains(&Target::Accelerate) && !targets.contains(&Target::Torchrun));
    let why = not_expressed(&p, Target::Accelerate).expect("refused");
    assert!(why.contains("DataCollatorWithFlattening"), "{why}");
    let spec = resolve(&p).expect("ok").spec;
    for t in [Target::Trainer, Target::Fsdp2] {
        let text = export(&spec, &p, t).text;
        assert!(
            text.contains("DataCollatorWithFlattening(return_position_ids=True)"),
            "{t:?}"
        );
    }
    assert!(
        export(&spec, &p, Target::Trainer)
            .text
            .contains("data_collator=data_collator")
    );
}

/// Long sequences on several data-parallel replicas are offered context parallelism in the
/// strategy table, with twice the accumulation (the same tokens per step: it does not change
/// the training); short ones are not.
#[test]
fn strategy_table_offers_cp_for_long_sequences() {
    let a = analyze(&scen(&format!("{LONG}&gpus=8&seq=32768"))).expect("ok");
    let row = a
        .strategies
        .as_ref()
        .expect("ok")
        .iter()
        .find(|r| r.id == "context_parallel")
        .expect("offered");
    assert!(!row.changes_training);
    assert!(
        row.link.contains("cp=2") && row.link.contains("accum=2"),
        "{}",
        row.link
    );
    let short = analyze(&scen(&format!("{LONG}&gpus=8&seq=4096"))).expect("ok");
    assert!(
        short
            .strategies
            .expect("ok")
            .iter()
            .all(|r| r.id != "context_parallel")
    );
}

/// What fits under context parallelism: the longest sequence is a whole number of the 2·cp
/// load-balanced chunks, and cp = 4 fits a longer one than cp = 1 on the same GPUs.
#[test]
fn longest_sequence_counts_whole_chunks() {
    let cp = analyze(&scen(&format!("{LONG}&gpus=8&seq=32768&cp=4"))).expect("ok");
    let one = analyze(&scen(&format!("{LONG}&gpus=8&seq=32768"))).expect("ok");
    let (a, b) = (
        cp.fit.expect("ok").max_seq.expect("fits"),
        one.fit.expect("ok").max_seq.expect("fits"),
    );
    assert_eq!(a % 8, 0, "{a}");
    assert!(a > b, "cp 4: {a}, cp 1: {b}");
}
