//! The warning for a block larger than the room left under the peak (the caching allocator's
//! fragmentation), against the runs an H100 measured (tests/reference/gpu): Llama 3.2 1B,
//! amp-bf16, checkpointing, 16 x 2048 tokens stopped short of its peak on one 15.66 GiB block
//! and trained with expandable segments; at 8 x 2048 in bf16 its 7.83 GiB block fitted easily.

use headroom_core::codec::{decode_pairs, query_pairs};
use headroom_core::{Scenario, estimate};

fn warnings(link: &str) -> Vec<String> {
    let pairs = query_pairs(link).expect("query");
    let scen = decode_pairs(Scenario::default(), &pairs).expect("valid link");
    estimate(&scen).expect("estimates").warnings
}

const RUN: &str =
    "model=llama-3.2-1b&gpu=h100-sxm-80gb&method=full&optimizer=adamw&attention=sdpa&seq=2048";

#[test]
fn the_run_that_stopped_on_fragmentation_is_warned_and_expandable_segments_clear_it() {
    let stopped = warnings(&format!("{RUN}&precision=amp-bf16&ckpt=full&batch=16"));
    let w = stopped
        .iter()
        .find(|w| w.contains("largest single allocation"))
        .expect("a fragmentation warning");
    assert!(
        w.contains("15.66 GiB") && w.contains("expandable_segments:True"),
        "{w}"
    );
    let expandable = warnings(&format!(
        "{RUN}&precision=amp-bf16&ckpt=full&batch=16&expandable=1"
    ));
    assert!(
        !expandable
            .iter()
            .any(|w| w.contains("largest single allocation")),
        "{expandable:?}"
    );
    let roomy = warnings(&format!("{RUN}&precision=bf16&ckpt=none&batch=8"));
    assert!(
        !roomy
            .iter()
            .any(|w| w.contains("largest single allocation")),
        "{roomy:?}"
    );
}
