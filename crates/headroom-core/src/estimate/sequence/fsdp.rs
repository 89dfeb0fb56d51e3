//! FSDP's units in the replayed step: the hooks [`Units`] the sequence calls around each unit,
//! and FSDP2's ([`Fsdp2`]; FSDP1's flat parameters are [`super::fsdp1`]).
//!
//! FSDP2's units (`fully_shard`: one unit a decoder layer and the root
//! unit around them), on the streams torch 2.11's `_fsdp_param_group.py` and
//! `_fsdp_collectives.py` allocate on, in the order the H200's allocator traces recorded them
//! (tests/reference/gpu/h200/fsdp/traces, `fsdp_p2_trace4` and `fsdp_p2_trace6`):
//!
//! - an all-gather's output is allocated on the all-gather copy-in stream, the unit's unsharded
//!   parameters on the default stream (copied out of it), and the output is freed after the next
//!   unit's copy-out (it waits for the event the next all-gather records);
//! - in forward each layer is gathered as it runs and resharded after it; the root (embeddings,
//!   final norm, lm_head) stays gathered from the first forward to the end of backward;
//! - in backward a layer's pre-backward unshards it and prefetches the next one's all-gather
//!   output; its post-backward frees its unsharded parameters, then the previous reduce-scatter
//!   input, allocates its own (default stream, the reduce dtype), frees the unsharded gradients
//!   and allocates the sharded gradient on the reduce-scatter stream, kept until `zero_grad`
//!   (cast there to the parameter's dtype when the reduce dtype differs).
//!
//! The side streams' blocks serve only their own stream ([`crate::allocator`]), which is what
//! keeps 2-4 GiB of segments beside the default stream's cache on the traced runs.

use crate::allocator::Allocation;
use crate::states::FsdpBuffers;

use super::{Replay, split};

/// The all-gather copy-in stream and the reduce-scatter stream (any numbers but the default 0).
const COPY_IN: u64 = 1;
const REDUCE_SCATTER: u64 = 2;

/// What FSDP does around its units as the replay walks the step: the root unit (embeddings,
/// final norm, lm_head) and one unit a decoder layer.
pub(super) trait Units {
    /// The root's pre-forward: gathered for the whole step.
    fn gather_root(&mut self, r: &mut Replay);
    /// A layer's pre-forward.
    fn gather_layer(&mut self, r: &mut Replay);
    /// A layer's post-forward (`reshard_after_forward`).
    fn reshard_layer(&mut self, r: &mut Replay);
    /// The root's post-forward, after the loss.
    fn root_post_forward(&mut self, r: &mut Replay);
    /// The root's pre-backward: the last layer prefetched.
    fn prefetch_last(&mut self, r: &mut Replay);
    /// A layer's pre-backward: it is unsharded from what was prefetched, and the next layer
    /// prefetched (none before the first layer).
    fn unshard_for_backward(&mut self, r: &mut Replay, prefetch: bool);
    /// The root's unsharded gradients as backward makes them.
    fn root_grads(&mut self) -> &mut RootGrads;
    /// A layer's post-backward, given the gradients its backward made: its parameters
    /// resharded, its gradients reduce-scattered into sharded ones kept in `into` (added into
    /// those kept when accumulating).
    fn layer_post_backward(
        &mut self,
        r: &mut Replay,
        unsharded: Vec<Allocation>,
        into: &mut Vec<Allocation>,
        acc: bool,
    );
    /// The root's post-backward, after the embedding's backward.
    fn root_post_backward(&mut self, r: &mut Replay, into: &mut Vec<Allocation>, acc: bool);
}

/// FSDP2's buffers as the replay walks the step: what each unit holds now.
pub(super) struct Fsdp2 {
    f: FsdpBuffers,
    /// One gathered layer's and the root's unsharded parameters, a request per tensor.
    layer_params: Vec<u64>,
    root_params: Vec<u64>,
    /// The sharded gradient of a layer and of the root as the optimizer sees them.
    layer_sharded: u64,
    root_sharded: u64,
    /// The last all-gather output, kept until the next unit's copy-out.
    all_gather: Option<Allocation>,
    layer: Vec<Allocation>,
    root: Vec<Allocation>,
    /// The root's unsharded gradients (lm_head's from its backward, the rest at the end).
    root_grads: RootGrads,
    /// The previous post-backward's reduce-scatter input, freed by the next post-backward.
    reduce_input: Option<Allocation>,
}

impl Fsdp2 {
    /// `layer_tensors` and `outside_tensors`: each parameter's elements, in the model's order;
    /// the sharded gradients are what the states say a layer's and the outside's are.
    pub(super) fn new(
        f: FsdpBuffers,
        layer_tensors: &[u64],
        outside_tensors: &[u64],
        layer_sharded: u64,
        root_sharded: u64,
    ) -> Self {
        Fsdp2 {
            f,
            layer_params: split(f.layer, layer_tensors),
            root_params: split(f.root, outside_tensors),
            layer_sharded,
            root_sharded,
            all_gather: None,
            layer: Vec::new(),
            root: Vec::new(),
            root_grads: RootGrads::new(f.root_grads),
            reduce_input: None,
        }
    }

    /// A unit's pre-forward: its all-gather, its copy-out, the previous output freed.
    fn gather(&mut self, r: &mut Replay, root: bool) {
        let output = self.all_gather(r, if root { self.f.root } else { self.f.layer });
        self.copy_out(r, root);
        r.put(self.all_gather.take());
        self.all_gather = output;
    }

    /// A unit's all-gather output on the copy-in stream.
    fn all_gather(&self, r: &mut Replay, bytes: u64) -> Option<Allocation> {
        r.get_on(COPY_IN, bytes)
    }

    /// A unit's unsharded parameters, written out of the all-gather output.
    fn copy_out(&mut self, r: &mut Replay, root: bool) {
        let sizes = if root {
            &self.root_params
        } else {
            &self.layer_params
        };
        let params = sizes.iter().filter_map(|&b| r.get(b)).collect();
        if root {
            self.root = params;
        } else {
            self.layer = params;
        }
    }

    /// One unit's reduce-scatter: its input replaces the previous one's, the unsharded
    /// gradients go, and the sharded gradient is kept (`into`) or, when accumulating, added
    /// into the one kept and freed.
    fn reduce_scatter(
        &mut self,
        r: &mut Replay,
        (input, copy_in): (u64, u64),
        sharded: u64,
        unsharded: Vec<Allocation>,
        into: &mut Vec<Allocation>,
        acc: bool,
    ) {
        r.put(self.reduce_input.take());
        self.reduce_input = r.get(input);
        r.put_all(unsharded);
        // The reduce-scatter's output: the gradients' share of the input, without the root's
        // copy-in chunk (a temporary beside it).
        let output = r.get_on(REDUCE_SCATTER, (input - copy_in).div_ceil(self.f.shards));
        let kept = cast_if_needed(r, &self.f, REDUCE_SCATTER, output, sharded);
        keep_or_add(r, kept, into, acc);
    }
}

impl Units for Fsdp2 {
    fn gather_root(&mut self, r: &mut Replay) {
        self.gather(r, true);
    }

    fn gather_layer(&mut self, r: &mut Replay) {
        self.gather(r, false);
    }

    /// A layer's post-forward (`reshard_after_forward`): its unsharded parameters go.
    fn reshard_layer(&mut self, r: &mut Replay) {
        r.put_all(std::mem::take(&mut self.layer));
    }

    /// The root's post-forward, after the loss: the last layer's all-gather output goes.
    fn root_post_forward(&mut self, r: &mut Replay) {
        r.put(self.all_gather.take());
    }

    /// The root's pre-backward: the last layer's all-gather prefetched.
    fn prefetch_last(&mut self, r: &mut Replay) {
        self.all_gather = self.all_gather(r, self.f.layer);
    }

    /// A layer's pre-backward: its copy-out from the prefetched output, which goes, and the
    /// next layer's all-gather prefetched (none before the first layer).
    fn unshard_for_backward(&mut self, r: &mut Replay, prefetch: bool) {
        self.copy_out(r, false);
        r.put(self.all_gather.take());
        if prefetch {
            self.all_gather = self.all_gather(r, self.f.layer);
        }
    }

    fn root_grads(&mut self) -> &mut RootGrads {
        &mut self.root_grads
    }

    /// A layer's post-backward: its parameters resharded, its gradients reduce-scattered.
    fn layer_post_backward(
        &mut self,
        r: &mut Replay,
        unsharded: Vec<Allocation>,
        into: &mut Vec<Allocation>,
        acc: bool,
    ) {
        self.reshard_layer(r);
        let input = (self.f.layer_reduce, 0);
        self.reduce_scatter(r, input, self.layer_sharded, unsharded, into, acc);
    }

    /// The root's post-backward, after the embedding's backward: the root resharded, its
    /// gradients reduce-scattered, and the last reduce-scatter input freed.
    fn root_post_backward(&mut self, r: &mut Replay, into: &mut Vec<Allocation>, acc: bool) {
        r.put_all(std::mem::take(&mut self.root));
        let grads = self.root_grads.take();
        if self.f.root_reduce > 0 {
            let input = (self.f.root_reduce, self.f.root_copy_in);
            self.reduce_scatter(r, input, self.root_sharded, grads, into, acc);
        } else {
            r.put_all(grads);
        }
        r.put(self.reduce_input.take());
    }
}

/// The root's unsharded gradients as backward makes them (lm_head's from its backward, the
/// rest at the embedding's), handed to the root's post-backward.
pub(super) struct RootGrads {
    made: Vec<Allocation>,
    bytes: u64,
    total: u64,
}

impl RootGrads {
    pub fn new(total: u64) -> Self {
        RootGrads {
            made: Vec::new(),
            bytes: 0,
            total,
        }
    }

    pub fn make(&mut self, r: &mut Replay, bytes: u64) {
        self.made.extend(r.get(bytes));
        self.bytes += bytes;
    }

    /// Bytes not yet made.
    pub fn rest(&self) -> u64 {
        self.total.saturating_sub(self.bytes)
    }

    pub fn take(&mut self) -> Vec<Allocation> {
        self.bytes = 0;
        std::mem::take(&mut self.made)
    }
}

/// The reduce-scatter's output, or its cast to the sharded gradient's dtype (`sharded` bytes)
/// on the same stream where the reduce dtype is not the parameter's.
pub(super) fn cast_if_needed(
    r: &mut Replay,
    f: &FsdpBuffers,
    stream: u64,
    output: Option<Allocation>,
    sharded: u64,
) -> Option<Allocation> {
    if f.reduce_cast {
        let cast = r.get_on(stream, sharded);
        r.put(output);
        cast
    } else {
        output
    }
}

/// A sharded gradient kept until `zero_grad`, or, when accumulating, added into the one kept
/// and freed.
pub(super) fn keep_or_add(
    r: &mut Replay,
    grad: Option<Allocation>,
    into: &mut Vec<Allocation>,
    acc: bool,
) {
    if acc {
        r.put(grad);
    } else {
        into.extend(grad);
    }
}
