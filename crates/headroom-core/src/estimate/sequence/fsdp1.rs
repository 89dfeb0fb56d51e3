//! FSDP1's flat parameters in the replayed step (`FullyShardedDataParallel` as accelerate wraps
//! it for the Trainer: FULL_SHARD, BACKWARD_PRE, `limit_all_gathers`), on the streams torch
//! 2.11's `_runtime_utils.py` and `_flat_param.py` allocate on, as the H200's allocator traces
//! recorded them (tests/reference/gpu/h200/fsdp/traces, `fsdp_trace4`, `fsdp_p2_trace5`):
//!
//! - under a mixed-precision policy each unshard first casts the rank's shard to the compute
//!   dtype on the pre-unshard stream;
//! - the all-gather's output is the unit's unsharded flat parameter itself, allocated on the
//!   unshard stream; so is the flat gradient autograd builds from the views' gradients
//!   (`SplitWithSizesBackward0`) at the end of the unit's backward;
//! - the post-backward stream reduce-scatters the flat gradient (or its cast copy in the reduce
//!   dtype) into a sharded output, cast there to the parameter's dtype and kept until
//!   `zero_grad`: each layer's in a segment of its own;
//! - resharding frees the unsharded parameter after `record_stream` on the default stream, so
//!   its block is reused only once the GPU has passed the unit's last kernel. The
//!   `limit_all_gathers` rate limiter keeps the CPU at most a unit or two ahead; the replay
//!   takes the late side of that race, which is what the traces cached: a reshard's block is
//!   free again right after the next unit's unshard has allocated (two layers on the unshard
//!   stream in forward, three to four in backward with the prefetch and the flat gradient).
//!   Every wait is over at the end of the forward and of the backward: the traced runs
//!   synchronised there (the measuring script reads the levels), and so does the replay.
//!
//! On the 1B trace the replay's pre-unshard and post-backward streams hold the run's segments
//! exactly; its unshard stream 1.33 GiB where the run held 1.93 (a tied root's second flat
//! gradient copy is not written out).
//!
//! The root is not resharded after forward (it is the root), and resharded after backward.

use crate::allocator::Allocation;
use crate::states::FsdpBuffers;

use super::Replay;
use super::fsdp::{RootGrads, Units, cast_if_needed, keep_or_add};

/// The pre-unshard, unshard and post-backward streams (any numbers but the default 0).
const PRE_UNSHARD: u64 = 1;
const UNSHARD: u64 = 2;
const POST_BACKWARD: u64 = 3;

/// FSDP1's flat parameters as the replay walks the step.
pub(super) struct Fsdp1 {
    f: FsdpBuffers,
    /// The sharded gradient of a layer and of the root as the optimizer sees them.
    layer_sharded: u64,
    root_sharded: u64,
    root: Option<Allocation>,
    /// The running layer's flat parameter, and the prefetched one's.
    layer: Option<Allocation>,
    prefetched: Option<Allocation>,
    /// Resharded blocks whose frees wait on the default stream (`record_stream`).
    pending: Vec<Allocation>,
    root_grads: RootGrads,
}

/// One unit's gradient bytes through its post-backward: the flat gradient, its cast copy in the
/// reduce dtype (0 where that is the gradient's own), and the sharded gradient kept.
struct Reduction {
    grads: u64,
    reduce: u64,
    sharded: u64,
}

impl Fsdp1 {
    pub(super) fn new(f: FsdpBuffers, layer_sharded: u64, root_sharded: u64) -> Self {
        Fsdp1 {
            f,
            layer_sharded,
            root_sharded,
            root: None,
            layer: None,
            prefetched: None,
            pending: Vec::new(),
            root_grads: RootGrads::new(f.root_grads),
        }
    }

    /// One unit unsharded: the shard's cast, the flat parameter, then the blocks resharded
    /// before it are free again.
    fn unshard(&mut self, r: &mut Replay, bytes: u64) -> Option<Allocation> {
        let cast = if self.f.shard_cast {
            r.get_on(PRE_UNSHARD, bytes.div_ceil(self.f.shards))
        } else {
            None
        };
        let flat = r.get_on(UNSHARD, bytes);
        r.put(cast);
        r.put_all(std::mem::take(&mut self.pending));
        flat
    }

    /// Resharding: the block waits for the default stream.
    fn reshard(&mut self, r: &mut Replay, flat: Option<Allocation>) {
        self.pending.extend(r.defer(flat));
    }

    /// The post-backward: the views' gradients concatenated into the flat gradient, which the
    /// post-backward stream reduce-scatters (through a cast copy where the reduce dtype is not
    /// the gradient's) into the sharded gradient.
    fn reduce_scatter(
        &mut self,
        r: &mut Replay,
        views: Vec<Allocation>,
        sizes: Reduction,
        into: &mut Vec<Allocation>,
        acc: bool,
    ) {
        let Reduction {
            grads,
            reduce,
            sharded,
        } = sizes;
        if grads == 0 {
            return r.put_all(views);
        }
        let flat = r.get_on(UNSHARD, grads);
        r.put_all(views);
        let copy = r.get_on(POST_BACKWARD, reduce);
        let input = if reduce > 0 { reduce } else { grads };
        let output = r.get_on(POST_BACKWARD, input.div_ceil(self.f.shards));
        r.put(copy);
        r.put(flat);
        let kept = cast_if_needed(r, &self.f, POST_BACKWARD, output, sharded);
        keep_or_add(r, kept, into, acc);
    }
}

impl Units for Fsdp1 {
    fn gather_root(&mut self, r: &mut Replay) {
        self.root = self.unshard(r, self.f.root);
    }

    fn gather_layer(&mut self, r: &mut Replay) {
        self.layer = self.unshard(r, self.f.layer);
    }

    fn reshard_layer(&mut self, r: &mut Replay) {
        let flat = self.layer.take();
        self.reshard(r, flat);
    }

    fn root_post_forward(&mut self, r: &mut Replay) {
        r.put_all(std::mem::take(&mut self.pending));
    }

    fn prefetch_last(&mut self, r: &mut Replay) {
        self.prefetched = self.unshard(r, self.f.layer);
    }

    fn unshard_for_backward(&mut self, r: &mut Replay, prefetch: bool) {
        self.layer = self.prefetched.take();
        if prefetch {
            self.prefetched = self.unshard(r, self.f.layer);
        }
    }

    fn root_grads(&mut self) -> &mut RootGrads {
        &mut self.root_grads
    }

    fn layer_post_backward(
        &mut self,
        r: &mut Replay,
        unsharded: Vec<Allocation>,
        into: &mut Vec<Allocation>,
        acc: bool,
    ) {
        let sizes = Reduction {
            grads: self.f.layer_grads,
            reduce: self.f.layer_reduce,
            sharded: self.layer_sharded,
        };
        self.reduce_scatter(r, unsharded, sizes, into, acc);
        let flat = self.layer.take();
        self.reshard(r, flat);
    }

    fn root_post_backward(&mut self, r: &mut Replay, into: &mut Vec<Allocation>, acc: bool) {
        let views = self.root_grads.take();
        let sizes = Reduction {
            grads: self.f.root_grads,
            reduce: self.f.root_reduce,
            sharded: self.root_sharded,
        };
        self.reduce_scatter(r, views, sizes, into, acc);
        let flat = self.root.take();
        self.reshard(r, flat);
        r.put_all(std::mem::take(&mut self.pending));
    }
}
