//! What an MoE layer's experts save: the routers, transformers' grouped_mm experts, gpt-oss's,
//! Llama 4's and Qwen3-Next's experts, and the shared experts.
//!
//! gpt-oss's grouped_mm experts route tokens x top-k rows whatever the routing. The other MoE
//! layers' grouped_mm experts sit behind their router (`Moe::router`): the generic softmax router;
//! DeepSeek-V2's fp32 softmax with its group-limited mask; DeepSeek-V3's and GLM-4.5's fp32
//! sigmoid, whose group top-k autograd frees after forward. Llama 4's MoE sends every token through
//! every expert with a bmm.

use super::linear::{
    adapted_linear_inputs, linear_inputs, mlp_linear_inputs, mlp_lora_inputs, next_linear_input,
    router_inputs,
};
use super::mlp::gated_mlp;
use super::{Inventory, Shape};
use crate::dtype::DType;
use crate::model::classes::RouterWeight;
use crate::model::{ModelSpec, Moe, Router};

/// Routed experts: each token visits top-k experts; the router saves its logits and probs.
pub(super) fn moe_mlp(inv: &mut Inventory, spec: &ModelSpec, sh: &Shape) {
    let Some(m) = &spec.moe else { return };
    if spec.is_gpt_oss() {
        return gpt_oss_moe(inv, spec, sh, m);
    }
    if spec.llama4.is_some() {
        return llama4_moe(inv, spec, sh, m);
    }
    if spec.gated_attention() {
        return qwen3_next_moe(inv, spec, sh, m);
    }
    let t = sh.tokens();
    let c = sh.compute();
    let routed = t * m.top_k;
    if m.router != Router::Softmax {
        deepseek_router(inv, spec, sh, m);
    } else {
        softmax_router(inv, spec, sh, m);
    }
    // transformers' grouped_mm experts (`integrations/moe.py`, the default on sm80+ and on
    // CPU): the routed rows sorted by expert, their orders and the rows per expert. Measured
    // on fake CUDA at full size (Mixtral, Qwen1.5/Qwen3-MoE, Granite-MoE: exact).
    inv.add_n(
        what!("routed rows' orders, int64 (saved by the gathers and the scatter back)"),
        routed,
        DType::I64,
        3,
    );
    inv.add(
        what!("rows per expert, int32 (saved by grouped_mm)"),
        m.experts,
        DType::I32,
    );
    // Each routed token carries its hidden state and the expert MLP intermediates. Autocast
    // has no rule for grouped_mm: under it the experts run in the weights' dtype, fp32 (as
    // gpt-oss's do; fake CUDA at full size: Mixtral and Qwen MoE 30-41% under before).
    let x = if sh.amp() { sh.stream() } else { c };
    let f = m.expert_intermediate / sh.tp;
    grouped_experts(inv, spec, sh, (routed, f), x);
    inv.add(
        what!("routing weights applied to expert outputs"),
        routed * spec.hidden,
        x,
    );
    // Each routed row's weight, saved by its multiply: in the router's score dtype (Mixtral's
    // and DeepSeek's routers: fp32 but for DeepSeek-V3's under autocast); Granite casts it to
    // the hidden states' dtype (`type_as`: fp32 under autocast, fake CUDA at full size), the
    // others to the logits' dtype.
    let weight = match m.router {
        Router::Softmax => match spec.class().traits.router_weight {
            RouterWeight::Fp32 => DType::F32,
            RouterWeight::Stream => sh.stream(),
            RouterWeight::Logits => c,
        },
        _ => deepseek_score_dtype(m, sh),
    };
    inv.add(
        what!("routing weight of each routed row (saved by mul)"),
        routed,
        weight,
    );
    if m.shared_intermediate > 0 {
        gated_mlp(inv, spec, sh, m.shared_intermediate / sh.tp);
        if m.shared_gate {
            // sigmoid(shared_expert_gate(x)) * shared_expert(x): the product saves both; the
            // gate's Linear saves its own cast of x under autocast (fake CUDA, Qwen1.5-MoE at
            // full size: exact in bf16 and under autocast).
            if sh.amp() && sh.base_trainable {
                mlp_linear_inputs(
                    inv,
                    label!("shared_expert_gate input"),
                    t * spec.hidden,
                    1,
                    sh,
                );
            }
            shared_gate_adapter(inv, t * spec.hidden, sh);
            inv.add(what!("shared expert gate output"), t, c);
            inv.add(
                what!("shared expert output (saved by the gate's product)"),
                t * spec.hidden,
                c,
            );
        }
    }
}

/// The grouped_mm experts' saved tensors for `routed` rows of intermediate width `f`, in `x`:
/// the gathered rows (for the weights' gradient) and four intermediates (gate and up, the
/// activation, their product) when the experts train, in full training or under peft's
/// adapters; frozen, grouped_mm keeps no input and the down projection no product (measured
/// on CPU under LoRA: tests/reference/test_peft.py); and the adapted experts' folded weights.
fn grouped_experts(
    inv: &mut Inventory,
    spec: &ModelSpec,
    sh: &Shape,
    (routed, f): (u64, u64),
    x: DType,
) {
    let trains = sh.base_trainable || sh.lora_experts;
    if trains {
        inv.add(
            what!("tokens gathered per expert (saved by the experts' grouped_mm)"),
            routed * spec.hidden,
            x,
        );
    }
    inv.add_n(
        what!("expert intermediates (gate, up, activation, product)"),
        routed * f,
        x,
        if trains { 4 } else { 3 },
    );
    folded_expert_weights(inv, spec, sh, f);
}

/// peft's `ParamWrapper` on fused experts: each forward folds the adapters into a copy of the
/// whole expert stack (`baddbmm(W, lhs, rhs)`, in the base weight's dtype, outside autocast),
/// which grouped_mm saves for the input's gradient; baddbmm saves the low-rank factors, cast
/// to that dtype where the adapters are another (measured on CPU: tests/reference/test_peft.py).
fn folded_expert_weights(inv: &mut Inventory, spec: &ModelSpec, sh: &Shape, f: u64) {
    if !sh.lora_experts {
        return;
    }
    let (e, h, w) = (sh.local_experts, spec.hidden, sh.stream());
    inv.add(
        what!(
            "experts' weights with the adapters folded in (gate_up and down, saved by grouped_mm)"
        ),
        e * 3 * f * h,
        w,
    );
    if sh.adapter != w {
        let r = sh.lora_rank.unwrap_or(0);
        // gate_up at twice the rank: (2f x 2r) and (2r x h); down: (h x r) and (r x f).
        inv.add(
            what!("the adapters' factors cast to the weights' dtype (saved by baddbmm)"),
            e * (4 * r * f + 2 * r * h + r * h + r * f),
            w,
        );
    }
}

/// The adapter on a Qwen shared expert's gate (an nn.Linear(h, 1), which all-linear adapts).
fn shared_gate_adapter(inv: &mut Inventory, elements: u64, sh: &Shape) {
    if sh.lora_all_linear && !sh.base_trainable {
        adapted_linear_inputs(inv, label!("shared_expert_gate input"), elements, sh);
    }
}

/// An adapted router (peft's `ParamWrapper` on `gate.weight`): its linear saves its input,
/// for the weight's gradient, and the weight plus the adapters' product, in the weight's dtype.
fn adapted_router_weight(inv: &mut Inventory, spec: &ModelSpec, sh: &Shape, m: &Moe) {
    if sh.lora_router && !sh.base_trainable {
        inv.add(
            what!("router input (saved by its linear for the adapted weight)"),
            sh.tokens() * spec.hidden,
            sh.compute(),
        );
        // Under autocast the linear saves the folded weight's 16-bit cast (no leaf: not
        // cached), else the folded weight itself.
        inv.add(
            what!("router weight with the adapters folded in (saved by its linear)"),
            m.experts * spec.hidden,
            if sh.amp() { sh.compute() } else { sh.stream() },
        );
    }
}

/// The generic router (`Router::Softmax`): a Linear in the compute dtype, a softmax, top-k.
fn softmax_router(inv: &mut Inventory, spec: &ModelSpec, sh: &Shape, m: &Moe) {
    let t = sh.tokens();
    let routed = t * m.top_k;
    // With Qwen2-MoE's gated shared expert in full-precision training the router reads the
    // same norm output the shared expert's Linears save (counted with them); under autocast
    // each Linear saves its own cast copy.
    if !(m.shared_gate && sh.base_trainable && !sh.amp()) {
        router_inputs(inv, t * spec.hidden, sh);
    }
    adapted_router_weight(inv, spec, sh, m);
    if spec.class().traits.topk_softmax {
        // GraniteMoeTopKGating: top-k of the logits first, then a softmax over those k.
        inv.add(
            what!("router's top-k probabilities, fp32 (saved by softmax over the top-k logits)"),
            routed,
            DType::F32,
        );
    } else {
        inv.add(
            what!("router probabilities, fp32 (saved by softmax and topk)"),
            t * m.experts,
            DType::F32,
        );
    }
    inv.add(
        what!("router's top-k indices, int64 (saved by topk)"),
        routed,
        DType::I64,
    );
    if m.norm_topk {
        topk_division(
            inv,
            label!("top-k probabilities, fp32 (saved by their in-place division by the sum)"),
            (t, m.top_k),
            DType::F32,
        );
    }
}

/// A router's `topk_weights /= topk_weights.sum(...)`: the in-place division saves the top-k
/// weights (`what`, in `dtype`) and their sum, fp32 (autocast runs `sum` in fp32).
fn topk_division(inv: &mut Inventory, what: &str, (t, k): (u64, u64), dtype: DType) {
    inv.add(what, t * k, dtype);
    inv.add(
        what!("their sum, fp32 (saved by the division)"),
        t,
        DType::F32,
    );
}

/// DeepSeek's routers (`Router::DeepseekV2`, `Router::DeepseekV3`): `F.linear(x.float(),
/// weight.float())`. In 16-bit training both casts are copies: the Linear saves x's (t x h,
/// for the weight's gradient, when the weight trains) and the weight's (experts x h, for x's).
/// In fp32 both are the tensors themselves: x is the norm output the shared experts' Linears
/// save too (counted with them). Under autocast the Linear runs in 16 bits and saves its own
/// cast of x, as any Linear does. Then the scores (softmax or sigmoid, fp32, saved by it), the
/// top-k indices and, for DeepSeek-V2's group-limited choice, the mask of the groups kept.
/// DeepSeek-V3's group top-k and mask only choose the experts: autograd frees what they saved
/// when the forward ends (fake CUDA at full size, GLM-4.5-Air; tests/reference).
fn deepseek_router(inv: &mut Inventory, spec: &ModelSpec, sh: &Shape, m: &Moe) {
    let (t, h) = (sh.tokens(), spec.hidden);
    // The weight's gradient needs x: in full training, and where peft adapts the router (its
    // folded weight then stands where the weight did).
    let adapted = sh.lora_router && !sh.base_trainable;
    if sh.amp() {
        // Autocast runs the linear in 16 bits: as any adapted router's (its casts of x and of
        // the folded weight).
        router_inputs(inv, t * h, sh);
        adapted_router_weight(inv, spec, sh, m);
    } else if sh.stream() != DType::F32 {
        if sh.base_trainable || adapted {
            inv.add(
                what!("router input's fp32 copy (saved by the fp32 Linear)"),
                t * h,
                DType::F32,
            );
        }
        inv.add(
            what!("router weight's fp32 copy (saved by the fp32 Linear)"),
            m.experts * h,
            DType::F32,
        );
    } else if (sh.base_trainable && m.shared_intermediate == 0) || adapted {
        inv.add(
            what!("router input (saved by the Linear)"),
            t * h,
            DType::F32,
        );
    }
    let score = deepseek_score_dtype(m, sh);
    let scores = match m.router {
        Router::DeepseekV3 => label!("router scores (saved by sigmoid)"),
        _ => label!("router probabilities, fp32 (saved by softmax)"),
    };
    inv.add(scores, t * m.experts, score);
    if m.router
        == (Router::DeepseekV2 {
            group_limited: true,
        })
    {
        inv.add(
            what!("mask of the experts outside the chosen groups, bool (saved by masked_fill)"),
            t * m.experts,
            DType::Bool,
        );
    }
    inv.add(
        what!("router's top-k indices, int64 (saved by topk and gather)"),
        t * m.top_k,
        DType::I64,
    );
    if m.norm_topk {
        topk_division(
            inv,
            label!("top-k scores (saved by their in-place division by the sum)"),
            (t, m.top_k),
            score,
        );
    }
}

/// The dtype of a DeepSeek router's scores and of the weights taken from them: fp32, but for
/// DeepSeek-V3's sigmoid under autocast, which reads the Linear's 16-bit logits (sigmoid is on
/// no autocast list; DeepSeek-V2's softmax asks for fp32).
fn deepseek_score_dtype(m: &Moe, sh: &Shape) -> DType {
    if m.router == Router::DeepseekV3 && sh.amp() {
        sh.compute()
    } else {
        DType::F32
    }
}

/// gpt-oss's MoE as transformers 5 runs it (`GptOssTopKRouter`, then the grouped_mm experts
/// of `integrations/moe.py`, its default): every token visits top-k experts, so the routed
/// rows (tokens x top-k, sorted by expert) have the same shapes whatever the routing. The
/// experts run in the weights' dtype (fp32 under autocast, which has no rule for grouped_mm);
/// the router's Linear is autocast's.
fn gpt_oss_moe(inv: &mut Inventory, spec: &ModelSpec, sh: &Shape, m: &Moe) {
    let (t, c, x) = (sh.tokens(), sh.compute(), sh.stream());
    let (h, f) = (spec.hidden, m.expert_intermediate / sh.tp);
    let r = t * m.top_k;
    router_inputs(inv, t * h, sh);
    inv.add(
        what!("router's top-k indices, int64 (saved by topk)"),
        r,
        DType::I64,
    );
    inv.add(
        what!("routing weights (saved by softmax over the top-k)"),
        r,
        c,
    );
    grouped_mm_dispatch(inv, (r, h, m.experts), 4, x, sh);
    inv.add(
        what!("gate_up output with bias (saved by clamp)"),
        2 * r * f,
        x,
    );
    inv.add_n(
        what!("clamped gate, its sigmoid, up + 1 and the gated gate (saved by the clamped SwiGLU)"),
        r * f,
        x,
        4,
    );
    if sh.base_trainable {
        inv.add(
            what!("clamped SwiGLU output (saved by the down grouped_mm)"),
            r * f,
            x,
        );
    }
    inv.add(
        what!("routing weights in expert order (saved by mul)"),
        r,
        c,
    );
    inv.add(
        what!("down output with bias (saved by mul with the routing weights)"),
        r * h,
        x,
    );
}

/// Llama 4's MoE (`Llama4TextMoe`): the router's top-k scores through a sigmoid, then every
/// token through every expert (`hidden_states.repeat(experts, 1)` times its score, zero for
/// the experts not chosen) by one bmm per projection, so the routed rows are experts x tokens
/// whatever the routing; and the shared expert, which reads the router's input. Under
/// autocast the router and the shared expert's gate/up each cast that input, and the bmm casts
/// the fp32 scored rows.
fn llama4_moe(inv: &mut Inventory, spec: &ModelSpec, sh: &Shape, m: &Moe) {
    let (t, c, x) = (sh.tokens(), sh.compute(), sh.stream());
    let (h, f, si) = (
        spec.hidden,
        m.expert_intermediate / sh.tp,
        m.shared_intermediate / sh.tp,
    );
    let rows = m.experts * t;
    if sh.base_trainable {
        linear_inputs(
            inv,
            label!("router and shared expert gate/up_proj input"),
            t * h,
            3,
            sh,
        );
    } else {
        // The frozen router saves nothing; the shared expert's gate and up adapters do.
        mlp_lora_inputs(
            inv,
            label!("shared expert gate/up_proj input"),
            t * h,
            2,
            sh,
        );
    }
    inv.add(
        what!("router's top-k indices, int64 (saved by topk and scatter)"),
        t * m.top_k,
        DType::I64,
    );
    inv.add(
        what!("router scores, fp32 (saved by sigmoid)"),
        t * m.experts,
        DType::F32,
    );
    inv.add(
        what!("scores, one per expert and token (saved by mul)"),
        rows,
        c,
    );
    inv.add(
        what!("tokens repeated for every expert (saved by mul with the scores)"),
        rows * h,
        x,
    );
    if sh.base_trainable {
        inv.add(
            what!("scored rows, in the compute dtype (saved by the gate_up bmm)"),
            rows * h,
            c,
        );
    }
    inv.add(
        what!("experts' gate_up output (saved by the activation and the product)"),
        2 * rows * f,
        c,
    );
    inv.add(
        what!("experts' activation output (saved by the product)"),
        rows * f,
        c,
    );
    if sh.base_trainable {
        inv.add(
            what!("experts' product act(gate) * up (saved by the down bmm)"),
            rows * f,
            c,
        );
    }
    shared_expert_mlp(inv, t * si, c, sh);
}

/// Qwen3-Next's MoE (`Qwen3NextSparseMoeBlock`): the shared expert, the router (softmax over
/// all experts in fp32, top-k renormalized by a division) and the grouped_mm experts as
/// gpt-oss's run (tokens x top-k rows whatever the routing, in the weights' dtype, which
/// autocast leaves alone), and the shared expert's sigmoid gate. Under autocast the shared
/// expert's gate/up, the router and the shared gate each cast the input.
fn qwen3_next_moe(inv: &mut Inventory, spec: &ModelSpec, sh: &Shape, m: &Moe) {
    let (t, c, x) = (sh.tokens(), sh.compute(), sh.stream());
    let (h, f, si) = (
        spec.hidden,
        m.expert_intermediate / sh.tp,
        m.shared_intermediate / sh.tp,
    );
    let r = t * m.top_k;
    if sh.base_trainable {
        linear_inputs(
            inv,
            label!("shared expert gate/up, router and shared gate input"),
            t * h,
            4,
            sh,
        );
    } else {
        mlp_lora_inputs(
            inv,
            label!("shared expert gate/up_proj input"),
            t * h,
            2,
            sh,
        );
    }
    shared_expert_mlp(inv, t * si, c, sh);
    shared_gate_adapter(inv, t * h, sh);
    inv.add(
        what!("router probabilities, fp32 (saved by softmax)"),
        t * m.experts,
        DType::F32,
    );
    inv.add(
        what!("router's top-k indices, int64 (saved by topk)"),
        r,
        DType::I64,
    );
    inv.add(
        what!("top-k probabilities and their sum, fp32 (saved by the division)"),
        r + t,
        DType::F32,
    );
    adapted_router_weight(inv, spec, sh, m);
    grouped_mm_dispatch(inv, (r, h, m.experts), 3, x, sh);
    inv.add(
        what!("gate_up output (saved by the activation and the product)"),
        2 * r * f,
        x,
    );
    inv.add(what!("activation output (saved by the product)"), r * f, x);
    folded_expert_weights(inv, spec, sh, f);
    if sh.base_trainable || sh.lora_experts {
        inv.add(
            what!("product act(gate) * up (saved by the down grouped_mm)"),
            r * f,
            x,
        );
    }
    inv.add(
        what!("routing weights in expert order (saved by mul)"),
        r,
        c,
    );
    inv.add(
        what!("down output (saved by mul with the routing weights)"),
        r * h,
        x,
    );
    inv.add(what!("shared gate's sigmoid (saved by the product)"), t, c);
    inv.add(
        what!("shared expert output (saved by the product with its gate)"),
        t * h,
        c,
    );
}

/// What a shared expert's gated MLP saves after its input (`elements` = tokens x its width):
/// the gate and up outputs, the activation's output and, when the weights train, the product
/// down_proj saves (LoRA's adapters save their own input instead).
fn shared_expert_mlp(inv: &mut Inventory, elements: u64, c: DType, sh: &Shape) {
    inv.add(
        what!("shared expert gate output (saved by the activation)"),
        elements,
        c,
    );
    inv.add(
        what!("shared expert up output (saved by the product)"),
        elements,
        c,
    );
    inv.add(
        what!("shared expert activation output (saved by the product)"),
        elements,
        c,
    );
    if sh.base_trainable {
        next_linear_input(
            inv,
            label!("shared expert product act(gate) * up (saved by down_proj)"),
            elements,
            c,
            sh,
        );
    } else {
        mlp_lora_inputs(
            inv,
            label!("shared expert down_proj input"),
            elements,
            1,
            sh,
        );
    }
}

/// What transformers' grouped_mm experts save to route `r` token rows of width `h` to
/// `experts`: the rows' orders (`orders` int64 index tensors, for the gathers and the scatter
/// back), the rows per expert, and the gathered rows when the experts' weights train.
fn grouped_mm_dispatch(
    inv: &mut Inventory,
    (r, h, experts): (u64, u64, u64),
    orders: u64,
    x: DType,
    sh: &Shape,
) {
    inv.add_n(
        what!("routed rows' orders, int64 (saved by the gathers and the scatter back)"),
        r,
        DType::I64,
        orders,
    );
    inv.add(
        what!("rows per expert, int32 (saved by grouped_mm)"),
        experts,
        DType::I32,
    );
    if sh.base_trainable || sh.lora_experts {
        inv.add(
            what!("routed tokens, gathered (saved by grouped_mm)"),
            r * h,
            x,
        );
    }
}
