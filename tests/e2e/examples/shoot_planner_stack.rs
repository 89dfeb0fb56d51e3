//! Screenshots of the planner with a stack chosen (torchtitan: FSDP2 with tensor parallelism for
//! Llama 3.1 70B on 8 A100s) and of a GPU page's "fits with" paths, which the on-demand worker
//! computes, at desktop and phone widths (run by hand: `cargo run -p headroom-e2e --example
//! shoot_planner_stack -- OUT_DIR`).

use serde_json::json;
use std::time::Duration;

const LINK: &str = "/?v=1&model=llama-3.1-70b&gpu=a100-sxm4-80gb&gpus=8&accum=16";

fn main() {
    let out = std::path::PathBuf::from(std::env::args().nth(1).unwrap_or("/tmp".into()));
    let server =
        headroom_e2e::server::StaticServer::start(&headroom_e2e::dist_dir()).expect("server");
    let driver = headroom_e2e::webdriver::Driver::start();
    for (name, s) in [
        ("desktop", driver.session(1280, 900)),
        ("phone", driver.phone_session(390, 844)),
    ] {
        s.goto(&server.url(LINK));
        s.wait_ready();
        s.click(&s.find("#planner-open"));
        s.wait_for(
            "return document.querySelectorAll('#planner-plans tr[data-plan]').length > 0",
            Duration::from_secs(60),
            "the plans",
        );
        s.js(
            "const e = document.getElementById('planner-stack'); e.value = 'torchtitan'; e.dispatchEvent(new Event('change', {bubbles: true}));",
            json!([]),
        );
        s.wait_for(
            "return [...document.querySelectorAll('#planner-plans tr[data-plan]')].every(r => r.cells[7].textContent.includes('torchtitan'))",
            Duration::from_secs(60),
            "torchtitan's plans",
        );
        s.js(
            "document.querySelector('#planner-title').scrollIntoView()",
            json!([]),
        );
        s.screenshot(&out.join(format!("planner-stack-{name}.png")));
        s.goto(&server.url("/gpus/h100-sxm-80gb"));
        s.wait_ready();
        s.wait_for(
            "return document.querySelectorAll('.fits-with').length > 0",
            Duration::from_secs(60),
            "the worker's paths",
        );
        s.js(
            "document.querySelector('.fits-with').scrollIntoView()",
            json!([]),
        );
        s.screenshot(&out.join(format!("gpu-fits-with-{name}.png")));
    }
}
