//! PyTorch's CUDA caching allocator as a model: the reserved level is what it holds after a
//! sequence of allocations and frees, not allocated times a fraction.
//!
//! Follows `c10/cuda/CUDACachingAllocator.cpp` as written in PyTorch 2.11 to 2.15 (one device,
//! no CUDA graphs):
//! - a request is rounded up to 512 B (or to a power-of-two division with
//!   `roundup_power2_divisions`);
//! - requests up to 1 MiB come from the small pool, whose segments are 2 MiB; larger ones from
//!   the large pool, whose segments are 20 MiB below 10 MiB and the request rounded up to 2 MiB
//!   from there;
//! - a request takes the smallest cached free block of its pool that holds it (ties: the lowest
//!   address) and splits it when the rest is at least 512 B (small pool) or more than 1 MiB
//!   (large pool, and only below `max_split_size`); otherwise a new segment is reserved;
//! - a freed block merges with free neighbours of its segment and stays cached;
//! - when a new segment would pass the limit (the card, or `set_per_process_memory_fraction`),
//!   cached blocks are released and the reservation retried: with `max_split_size` set, only
//!   oversize blocks first; then every wholly free segment (what `empty_cache` does); then the
//!   request fails: out of memory.
//! - with `expandable_segments:True` each pool is one stretch of address space that grows by
//!   mapping pages (2 MiB small, 20 MiB large) where free space meets unmapped space; a block
//!   splits whenever 512 B or more is left; releasing the cache unmaps the whole pages inside
//!   free blocks.
//! - streams: a block belongs to the stream it was allocated on, and a request takes only free
//!   blocks of its own stream (the free set orders by stream first, `BlockComparatorSize`), so
//!   work on side streams (FSDP's all-gathers and reduce-scatters) keeps segments of its own;
//!   releasing the cache releases every stream's. Expandable segments are modelled for the
//!   default stream only.
//!
//! Checked against allocator traces recorded on an H200 (tests/allocator_traces.rs): the same
//! segments in the same order, the same reserved level at every phase, the same failure.
//!
//! The FSDP1 and FSDP2 traces (`tests/reference/gpu/h200/fsdp/traces/`) keep each action's stream,
//! and are replayed the same way.

use std::collections::{BTreeSet, VecDeque};

/// kMinBlockSize: every request is rounded up to a multiple of it.
pub const MIN_BLOCK: u64 = 512;
/// kSmallSize: requests up to this size come from the small pool.
pub const SMALL_SIZE: u64 = 1 << 20;
/// kSmallBuffer: the size of a small-pool segment.
pub const SMALL_BUFFER: u64 = 2 << 20;
/// kLargeBuffer: the size of a large-pool segment for requests under `MIN_LARGE_ALLOC`.
pub const LARGE_BUFFER: u64 = 20 << 20;
/// kMinLargeAlloc: from this size a segment is the request rounded up to `ROUND_LARGE`.
pub const MIN_LARGE_ALLOC: u64 = 10 << 20;
/// kRoundLarge: large segments are multiples of it.
pub const ROUND_LARGE: u64 = 2 << 20;

/// The allocator's settings (`PYTORCH_CUDA_ALLOC_CONF`) and its limit.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AllocatorSettings {
    /// Most bytes it may reserve: the card's free memory, or `set_per_process_memory_fraction`.
    pub limit: Option<u64>,
    /// `max_split_size_mb` in bytes: cached blocks this large are not split for smaller requests.
    pub max_split_size: Option<u64>,
    /// `roundup_power2_divisions`: requests above 512 B times this rounded to the next of this
    /// many divisions of a power of two (0 or 1: off).
    pub roundup_power2_divisions: u32,
    /// `expandable_segments:True`.
    pub expandable_segments: bool,
}

/// A live allocation, returned by `malloc` and given back to `free`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Allocation(usize);

/// A request the allocator could not serve within its limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutOfMemory {
    /// The request, in bytes.
    pub requested: u64,
    /// What was reserved when it failed, after releasing the cache.
    pub reserved: u64,
}

#[derive(Clone, Debug)]
struct Block {
    /// The stream it was allocated on (0: the default stream).
    stream: u64,
    address: u64,
    size: u64,
    small: bool,
    prev: Option<usize>,
    next: Option<usize>,
    in_use: bool,
    /// Backed by memory; only blocks of an expandable segment are ever unmapped.
    mapped: bool,
    expandable: bool,
    /// Freed by its owner but still in use by another stream's work: counted free, not reusable.
    free_requested: bool,
}

/// A cached free block's place in its pool: (stream, size, address, slot).
type FreeKey = (u64, u64, u64, usize);

/// Where each pool's expandable segment starts: far apart, so neither reaches the other, and
/// on a boundary of both page sizes (pages count from the segment's start).
const EXPANDABLE_BASE: [u64; 2] = [LARGE_BUFFER << 30, LARGE_BUFFER << 32];
/// Address space of one expandable segment (PyTorch reserves 9/8 of the card; any card fits).
const EXPANDABLE_SPAN: u64 = 1 << 50;

/// The allocator's state: its segments cut into blocks, free blocks cached per pool.
#[derive(Clone, Debug, Default)]
pub struct CachingAllocator {
    settings: AllocatorSettings,
    blocks: Vec<Block>,
    /// Slots of `blocks` no longer in any segment, reused.
    spare: Vec<usize>,
    /// Free blocks by (stream, size, address, slot): the small pool's, then the large pool's.
    free: [BTreeSet<FreeKey>; 2],
    /// Unmapped blocks of expandable segments by (address, slot), per pool.
    unmapped: [BTreeSet<(u64, usize)>; 2],
    next_address: u64,
    /// The addresses the driver gave the next segments, where a trace tells them.
    driver_addresses: VecDeque<u64>,
    reserved: u64,
    allocated: u64,
    peak_reserved: u64,
    peak_allocated: u64,
    segments: usize,
    segment_sizes: Vec<u64>,
}

/// A request's size as the allocator rounds it.
pub fn round_size(bytes: u64, divisions: u32) -> u64 {
    if bytes <= MIN_BLOCK {
        return MIN_BLOCK;
    }
    let divisions = u64::from(divisions);
    if divisions > 1 && bytes > MIN_BLOCK * divisions {
        // roundup_power2_next_division: the power of two below, cut into `divisions` steps.
        let floor = 1u64 << (63 - bytes.leading_zeros());
        if floor == bytes {
            return bytes;
        }
        let step = (floor / divisions).max(1);
        return bytes.div_ceil(step) * step;
    }
    bytes.div_ceil(MIN_BLOCK) * MIN_BLOCK
}

/// The segment reserved for a rounded request no cached block holds.
pub fn segment_size(rounded: u64) -> u64 {
    if rounded <= SMALL_SIZE {
        SMALL_BUFFER
    } else if rounded < MIN_LARGE_ALLOC {
        LARGE_BUFFER
    } else {
        rounded.div_ceil(ROUND_LARGE) * ROUND_LARGE
    }
}

impl CachingAllocator {
    pub fn new(settings: AllocatorSettings) -> Self {
        Self {
            settings,
            ..Self::default()
        }
    }

    /// Places the next segments at these addresses, in order, as cudaMalloc placed them in a
    /// recorded run. Equal-sized free blocks are taken lowest address first, so where the
    /// driver's addresses are known a replay follows every tie as the run did; otherwise each
    /// segment goes above the last.
    pub fn place_segments_at(&mut self, addresses: impl IntoIterator<Item = u64>) {
        self.driver_addresses = addresses.into_iter().collect();
    }

    /// Bytes held in segments (`torch.cuda.memory_reserved`).
    pub fn reserved(&self) -> u64 {
        self.reserved
    }

    /// Bytes in blocks handed out, as rounded and split (`torch.cuda.memory_allocated`).
    pub fn allocated(&self) -> u64 {
        self.allocated
    }

    pub fn peak_reserved(&self) -> u64 {
        self.peak_reserved
    }

    pub fn peak_allocated(&self) -> u64 {
        self.peak_allocated
    }

    /// Segments held now (cudaMalloc'd ones: an expandable segment's mapped pages are not
    /// counted here, only in `reserved`).
    pub fn segments(&self) -> usize {
        self.segments
    }

    /// Every segment reserved so far, in order (a release does not remove it); with expandable
    /// segments, every range mapped.
    pub fn segment_sizes(&self) -> &[u64] {
        &self.segment_sizes
    }

    /// Starts the peaks again from the current levels (`reset_peak_memory_stats`).
    pub fn reset_peaks(&mut self) {
        self.peak_reserved = self.reserved;
        self.peak_allocated = self.allocated;
    }

    /// Allocates `bytes` on the default stream, or fails as the allocator would.
    pub fn malloc(&mut self, bytes: u64) -> Result<Allocation, OutOfMemory> {
        self.malloc_on(0, bytes)
    }

    /// Allocates `bytes` on `stream` (any number naming it; 0 the default stream).
    pub fn malloc_on(&mut self, stream: u64, bytes: u64) -> Result<Allocation, OutOfMemory> {
        debug_assert!(
            stream == 0 || !self.settings.expandable_segments,
            "expandable segments are modelled on the default stream only"
        );
        let rounded = round_size(bytes, self.settings.roundup_power2_divisions);
        let small = rounded <= SMALL_SIZE;
        let slot = match self.take_cached(stream, small, rounded) {
            Some(slot) => slot,
            None => self.reserve_segment(stream, small, rounded, bytes)?,
        };
        self.split(slot, rounded);
        let block = &mut self.blocks[slot];
        block.in_use = true;
        self.allocated += block.size;
        self.peak_allocated = self.peak_allocated.max(self.allocated);
        Ok(Allocation(slot))
    }

    /// Frees an allocation: its block merges with free neighbours and stays cached.
    pub fn free(&mut self, allocation: Allocation) {
        let slot = allocation.0;
        debug_assert!(self.blocks[slot].in_use, "freed twice");
        if !self.blocks[slot].free_requested {
            self.allocated -= self.blocks[slot].size;
        }
        let block = &mut self.blocks[slot];
        block.in_use = false;
        block.free_requested = false;
        self.merge_free_neighbours(slot);
    }

    /// The owner frees a block another stream still uses (`record_stream`): it leaves the
    /// allocated level now, as PyTorch counts it, and is cached only when `free` follows (the
    /// stream's work done: the trace's free_completed).
    pub fn free_requested(&mut self, allocation: Allocation) {
        let block = &mut self.blocks[allocation.0];
        debug_assert!(block.in_use && !block.free_requested, "freed twice");
        block.free_requested = true;
        self.allocated -= block.size;
    }

    /// Releases every wholly free segment and unmaps the whole pages inside free blocks of
    /// expandable segments (`torch.cuda.empty_cache`).
    pub fn empty_cache(&mut self) {
        for pool in 0..2 {
            let cached: Vec<_> = self.free[pool].iter().copied().collect();
            for key in cached {
                let b = &self.blocks[key.3];
                if b.expandable {
                    self.unmap(key.3);
                } else if b.prev.is_none() && b.next.is_none() {
                    self.release(key);
                }
            }
        }
    }

    fn is_free_mapped(&self, slot: usize) -> bool {
        !self.blocks[slot].in_use && self.blocks[slot].mapped
    }

    fn pool(small: bool) -> usize {
        usize::from(!small)
    }

    /// Files a block that is not in use: with the free blocks if mapped, else the unmapped.
    fn cache(&mut self, slot: usize) {
        let b = &self.blocks[slot];
        if b.mapped {
            self.free[Self::pool(b.small)].insert((b.stream, b.size, b.address, slot));
        } else {
            self.unmapped[Self::pool(b.small)].insert((b.address, slot));
        }
    }

    fn uncache(&mut self, slot: usize) {
        let b = &self.blocks[slot];
        if b.mapped {
            self.free[Self::pool(b.small)].remove(&(b.stream, b.size, b.address, slot));
        } else {
            self.unmapped[Self::pool(b.small)].remove(&(b.address, slot));
        }
    }

    /// The smallest cached block of the stream's pool that holds `rounded` (get_free_block).
    fn take_cached(&mut self, stream: u64, small: bool, rounded: u64) -> Option<usize> {
        let mut fits = self.free[Self::pool(small)]
            .range((stream, rounded, 0, 0)..=(stream, u64::MAX, u64::MAX, usize::MAX));
        let mut best = *fits.next()?;
        // A block that could grow into unmapped space counts at the size it could grow to:
        // any later candidate that could grow less goes first.
        while self.blocks[best.3].expandable {
            match fits.next() {
                Some(&next) if self.growable(next.3) < self.growable(best.3) => best = next,
                _ => break,
            }
        }
        let (_, size, address, slot) = best;
        if let Some(max) = self.settings.max_split_size {
            // An oversize block serves no smaller request, and a large request only a block
            // within one large buffer of its size.
            if (rounded < max && size >= max) || (rounded >= max && size >= rounded + LARGE_BUFFER)
            {
                return None;
            }
        }
        self.free[Self::pool(small)].remove(&(stream, size, address, slot));
        Some(slot)
    }

    fn growable(&self, slot: usize) -> u64 {
        let b = &self.blocks[slot];
        let unmapped_next = b.next.filter(|&n| !self.blocks[n].mapped);
        b.size + unmapped_next.map_or(0, |n| self.blocks[n].size)
    }

    /// A new segment (or mapped range), releasing cached blocks and retrying when the limit
    /// stops it.
    fn reserve_segment(
        &mut self,
        stream: u64,
        small: bool,
        rounded: u64,
        requested: u64,
    ) -> Result<usize, OutOfMemory> {
        let size = segment_size(rounded);
        if let Some(slot) = self.grow(stream, small, rounded, size) {
            return Ok(slot);
        }
        if self.release_oversize(stream, size)
            && let Some(slot) = self.grow(stream, small, rounded, size)
        {
            return Ok(slot);
        }
        self.empty_cache();
        self.grow(stream, small, rounded, size).ok_or(OutOfMemory {
            requested,
            reserved: self.reserved,
        })
    }

    /// alloc_block: within the limit (checked on the segment's size in both modes), a new
    /// segment, or a mapped range of the pool's expandable segment.
    fn grow(&mut self, stream: u64, small: bool, rounded: u64, size: u64) -> Option<usize> {
        if self
            .settings
            .limit
            .is_some_and(|limit| self.reserved + size > limit)
        {
            return None;
        }
        if self.settings.expandable_segments {
            Some(self.map_expandable(small, rounded))
        } else {
            Some(self.new_segment(stream, small, size))
        }
    }

    fn new_segment(&mut self, stream: u64, small: bool, size: u64) -> usize {
        let address = self
            .driver_addresses
            .pop_front()
            .unwrap_or(self.next_address);
        let block = Block {
            stream,
            address,
            size,
            small,
            prev: None,
            next: None,
            in_use: false,
            mapped: true,
            expandable: false,
            free_requested: false,
        };
        self.next_address = self
            .next_address
            .max(address + size.div_ceil(ROUND_LARGE) * ROUND_LARGE);
        self.add_reserved(size);
        self.segments += 1;
        self.slot_for(block)
    }

    fn add_reserved(&mut self, size: u64) {
        self.reserved += size;
        self.peak_reserved = self.peak_reserved.max(self.reserved);
        self.segment_sizes.push(size);
    }

    /// try_allocate_expandable_block: the lowest-addressed run of free and unmapped space that
    /// holds `rounded`, its unmapped part mapped page by page; a free block just before an
    /// unmapped one grows into it. Returns the (free, mapped) block, out of the free set.
    fn map_expandable(&mut self, small: bool, rounded: u64) -> usize {
        let pool = Self::pool(small);
        let mut candidate = self.expandable_candidate(small, rounded);
        if !self.blocks[candidate].mapped {
            candidate = self.map(candidate, rounded.min(self.blocks[candidate].size));
        }
        while self.blocks[candidate].size < rounded {
            let next = self.blocks[candidate]
                .next
                .expect("unmapped space after a short block");
            let want = (rounded - self.blocks[candidate].size).min(self.blocks[next].size);
            candidate = self.map(next, want);
        }
        let b = &self.blocks[candidate];
        self.free[pool].remove(&(b.stream, b.size, b.address, candidate));
        candidate
    }

    /// find_expandable_block: unmapped blocks in address order, each with the free block just
    /// before it, until one run of free and unmapped blocks is long enough; else a new segment.
    fn expandable_candidate(&mut self, small: bool, rounded: u64) -> usize {
        let pool = Self::pool(small);
        let unmapped: Vec<usize> = self.unmapped[pool].iter().map(|&(_, s)| s).collect();
        for slot in unmapped {
            let start = self.blocks[slot]
                .prev
                .filter(|&p| self.is_free_mapped(p))
                .unwrap_or(slot);
            let (mut room, mut at) = (0, Some(start));
            while room < rounded
                && let Some(b) = at.filter(|&b| !self.blocks[b].in_use)
            {
                room += self.blocks[b].size;
                at = self.blocks[b].next;
            }
            if room >= rounded {
                return start;
            }
        }
        // A request past the span (larger than any card: a step that cannot run) gets a span of
        // its own size, so the replay still says what it would reserve.
        let page = if small { SMALL_BUFFER } else { LARGE_BUFFER };
        let slot = self.slot_for(Block {
            stream: 0,
            address: EXPANDABLE_BASE[pool],
            size: EXPANDABLE_SPAN.max(rounded.div_ceil(page) * page),
            small,
            prev: None,
            next: None,
            in_use: false,
            mapped: false,
            expandable: true,
            free_requested: false,
        });
        self.cache(slot);
        slot
    }

    /// map_block: maps whole pages from an unmapped block's start to cover `bytes`, leaves the
    /// rest unmapped after it, and merges the mapped part with free neighbours.
    fn map(&mut self, slot: usize, bytes: u64) -> usize {
        let page = if self.blocks[slot].small {
            SMALL_BUFFER
        } else {
            LARGE_BUFFER
        };
        self.uncache(slot);
        let b = self.blocks[slot].clone();
        let mapped = (bytes.div_ceil(page) * page).min(b.size);
        if mapped < b.size {
            let rest = self.cut(slot, mapped);
            self.cache(rest);
        }
        self.blocks[slot].mapped = true;
        self.add_reserved(mapped);
        self.merge_free_neighbours(slot)
    }

    /// Merges a free block with its free neighbours of the same kind (mapped or not), files
    /// the result and returns its slot.
    fn merge_free_neighbours(&mut self, slot: usize) -> usize {
        let mapped = self.blocks[slot].mapped;
        let same = |s: &Self, n: usize| !s.blocks[n].in_use && s.blocks[n].mapped == mapped;
        if let Some(prev) = self.blocks[slot].prev.filter(|&p| same(self, p)) {
            self.uncache(prev);
            let p = self.blocks[prev].clone();
            let block = &mut self.blocks[slot];
            block.address = p.address;
            block.size += p.size;
            block.prev = p.prev;
            if let Some(pp) = p.prev {
                self.blocks[pp].next = Some(slot);
            }
            self.spare.push(prev);
        }
        if let Some(next) = self.blocks[slot].next.filter(|&n| same(self, n)) {
            self.uncache(next);
            let n = self.blocks[next].clone();
            let block = &mut self.blocks[slot];
            block.size += n.size;
            block.next = n.next;
            if let Some(nn) = n.next {
                self.blocks[nn].prev = Some(slot);
            }
            self.spare.push(next);
        }
        self.cache(slot);
        slot
    }

    /// unmap_block: unmaps the whole pages inside a free block of an expandable segment; the
    /// partial pages at either end stay mapped and free.
    fn unmap(&mut self, slot: usize) {
        let b = self.blocks[slot].clone();
        let page = if b.small { SMALL_BUFFER } else { LARGE_BUFFER };
        let begin = b.address.div_ceil(page) * page;
        let end = (b.address + b.size) / page * page;
        if end <= begin {
            return;
        }
        self.uncache(slot);
        // The partial page before stays `slot`; the whole pages become `pages`.
        let mut pages = slot;
        if begin > b.address {
            pages = self.cut(slot, begin - b.address);
            self.cache(slot);
        }
        if end < b.address + b.size {
            let after = self.cut(pages, end - begin);
            self.cache(after);
        }
        self.blocks[pages].mapped = false;
        self.reserved -= end - begin;
        self.merge_free_neighbours(pages);
    }

    /// Cuts a block after its first `keep` bytes: the rest becomes a new block of the same
    /// segment and kind, not in use, linked after it and not yet filed. Returns the rest's slot.
    fn cut(&mut self, slot: usize, keep: u64) -> usize {
        let b = self.blocks[slot].clone();
        let rest = self.slot_for(Block {
            address: b.address + keep,
            size: b.size - keep,
            prev: Some(slot),
            in_use: false,
            free_requested: false,
            ..b.clone()
        });
        if let Some(n) = b.next {
            self.blocks[n].prev = Some(rest);
        }
        self.blocks[slot].size = keep;
        self.blocks[slot].next = Some(rest);
        rest
    }

    fn slot_for(&mut self, block: Block) -> usize {
        match self.spare.pop() {
            Some(slot) => {
                self.blocks[slot] = block;
                slot
            }
            None => {
                self.blocks.push(block);
                self.blocks.len() - 1
            }
        }
    }

    /// release_available_cached_blocks: with `max_split_size`, the smallest wholly free
    /// oversize segment of the stream that covers `size`, else the largest ones until `size`
    /// is covered.
    fn release_oversize(&mut self, stream: u64, size: u64) -> bool {
        let Some(max) = self.settings.max_split_size else {
            return false;
        };
        let oversize: Vec<_> = self.free[1]
            .range((stream, max.max(1), 0, 0)..=(stream, u64::MAX, u64::MAX, usize::MAX))
            .filter(|&&(_, _, _, s)| self.blocks[s].prev.is_none() && self.blocks[s].next.is_none())
            .copied()
            .collect();
        if let Some(&key) = oversize.iter().find(|k| k.1 >= size) {
            self.release(key);
            return true;
        }
        let mut freed = 0;
        for &key in oversize.iter().rev() {
            if freed >= size {
                break;
            }
            freed += key.1;
            self.release(key);
        }
        freed >= size
    }

    fn release(&mut self, key: FreeKey) {
        let small = self.blocks[key.3].small;
        self.free[Self::pool(small)].remove(&key);
        self.reserved -= key.1;
        self.segments -= 1;
        self.spare.push(key.3);
    }

    /// Splits a block taken for `rounded` bytes when the rest is worth keeping apart.
    fn split(&mut self, slot: usize, rounded: u64) {
        let b = self.blocks[slot].clone();
        let rest = b.size - rounded;
        let split = if b.small || self.settings.expandable_segments {
            rest >= MIN_BLOCK
        } else {
            self.settings.max_split_size.is_none_or(|max| rounded < max) && rest > SMALL_SIZE
        };
        if !split {
            return;
        }
        let remainder = self.cut(slot, rounded);
        self.cache(remainder);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_to_512_bytes_and_pick_their_pool_and_segment() {
        assert_eq!(round_size(1, 0), 512);
        assert_eq!(round_size(513, 0), 1024);
        assert_eq!(segment_size(round_size(1 << 20, 0)), SMALL_BUFFER);
        assert_eq!(segment_size(round_size((1 << 20) + 1, 0)), LARGE_BUFFER);
        assert_eq!(segment_size(round_size(10 << 20, 0)), 10 << 20);
        assert_eq!(segment_size(round_size((10 << 20) + 1, 0)), 12 << 20);
        // roundup_power2_divisions:4: 1.1 GB between 1 GiB and 2 GiB rounds to 1.25 GiB.
        assert_eq!(round_size(1_100_000_000, 4), 1_342_177_280);
    }

    /// With expandable segments and no limit, a request past the virtual span (a step larger
    /// than any card, which the replay still sizes) maps a span of its own; it panicked before
    /// (found by the property tests: Pythia 410M, 2,098 x 4,194,304 tokens).
    #[test]
    fn an_expandable_request_past_the_span_maps_its_own() {
        let mut a = CachingAllocator::new(AllocatorSettings {
            expandable_segments: true,
            ..AllocatorSettings::default()
        });
        let small = a.malloc(64 << 20).expect("fits");
        let huge = a.malloc(3 * EXPANDABLE_SPAN).expect("no limit");
        assert_eq!(a.allocated(), (64 << 20) + 3 * EXPANDABLE_SPAN);
        a.free(huge);
        a.free(small);
    }

    #[test]
    fn a_freed_block_is_reused_split_and_merged() {
        let mut a = CachingAllocator::new(AllocatorSettings::default());
        let x = a.malloc(12 << 20).expect("fits");
        assert_eq!((a.reserved(), a.allocated()), (12 << 20, 12 << 20));
        a.free(x);
        let y = a.malloc(4 << 20).expect("fits"); // the cached 12 MiB block, split: 8 MiB left
        let z = a.malloc(8 << 20).expect("fits"); // the rest, no new segment
        assert_eq!((a.reserved(), a.segments()), (12 << 20, 1));
        a.free(y);
        a.free(z); // merged back into one 12 MiB block
        let w = a.malloc(12 << 20).expect("fits");
        assert_eq!((a.reserved(), a.segments()), (12 << 20, 1));
        a.free(w);
        a.empty_cache();
        assert_eq!((a.reserved(), a.segments()), (0, 0));
    }

    #[test]
    fn a_stream_reuses_only_its_own_blocks_and_a_requested_free_waits() {
        let mut a = CachingAllocator::new(AllocatorSettings::default());
        let x = a.malloc_on(7, 12 << 20).expect("fits");
        a.free(x);
        // The default stream cannot take stream 7's cached block: a segment of its own.
        let y = a.malloc(12 << 20).expect("fits");
        assert_eq!((a.reserved(), a.segments()), (24 << 20, 2));
        // Freed while another stream still uses it: counted free, not yet reusable.
        a.free_requested(y);
        assert_eq!(a.allocated(), 0);
        let z = a.malloc(12 << 20).expect("fits");
        assert_eq!(a.segments(), 3);
        a.free(y);
        a.free(z);
        let w = a.malloc(12 << 20).expect("fits"); // now a cached default-stream block
        assert_eq!((a.segments(), a.allocated()), (3, 12 << 20));
        a.free(w);
        a.empty_cache(); // every stream's segments
        assert_eq!((a.reserved(), a.segments()), (0, 0));
    }

    #[test]
    fn at_the_limit_the_cache_is_released_then_the_request_fails() {
        let mut a = CachingAllocator::new(AllocatorSettings {
            limit: Some(30 << 20),
            ..AllocatorSettings::default()
        });
        let x = a.malloc(20 << 20).expect("fits");
        a.free(x); // cached: 20 MiB reserved, none allocated
        let y = a.malloc(24 << 20).expect("fits"); // 44 MiB would pass the limit: the cache goes first
        assert_eq!(a.reserved(), 24 << 20);
        let err = a.malloc(10 << 20).expect_err("too large");
        assert_eq!(
            err,
            OutOfMemory {
                requested: 10 << 20,
                reserved: 24 << 20
            }
        );
        a.free(y);
    }

    #[test]
    fn an_expandable_segment_maps_pages_grows_its_free_tail_and_unmaps_whole_pages() {
        let mut a = CachingAllocator::new(AllocatorSettings {
            expandable_segments: true,
            ..AllocatorSettings::default()
        });
        let x = a.malloc(30 << 20).expect("fits"); // two 20 MiB pages, 10 MiB left free
        assert_eq!(a.reserved(), 40 << 20);
        let y = a.malloc(25 << 20).expect("fits"); // the free 10 MiB tail grows by one page
        assert_eq!(
            (a.reserved(), a.segment_sizes()),
            (60 << 20, &[40 << 20, 20 << 20][..])
        );
        a.free(y); // 30 MiB free at the end: one whole page inside it
        a.empty_cache();
        assert_eq!(a.reserved(), 40 << 20);
        a.free(x);
        a.empty_cache();
        assert_eq!(a.reserved(), 0);
    }
}
