//! Screenshots of the planner's configuration for a plan torchtitan runs (tensor parallelism
//! under FSDP2), at desktop and phone widths (run by hand: `cargo run -p headroom-e2e --example
//! shoot_torchtitan -- OUT_DIR`). The first plan that offers `torchtitan_plan.py` is picked.

use serde_json::json;
use std::time::Duration;

const LINK: &str =
    "/?v=1&model=llama-3.1-70b&gpu=a100-sxm4-80gb&gpus=8&seq=4096&dp=fsdp&reduce32=1&ckpt=full";

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
            "return !!document.querySelector(\"button[data-target]\")",
            Duration::from_secs(60),
            "the plan's files",
        );
        let rows = s
            .js(
                "return document.querySelectorAll('#planner-plans tr[data-plan]').length",
                json!([]),
            )
            .as_u64()
            .unwrap_or(0);
        let mut found = false;
        for n in 0..rows {
            s.js(
                "document.querySelector(`#planner-plans tr[data-plan='${arguments[0]}'] button.pick`).click()",
                json!([n]),
            );
            std::thread::sleep(Duration::from_millis(1500));
            if s.js(
                "return !!document.querySelector(\"button[data-target='torchtitan']\")",
                json!([]),
            ) == json!(true)
            {
                found = true;
                break;
            }
        }
        assert!(found, "no plan offers torchtitan_plan.py");
        s.click(&s.find("button[data-target='torchtitan']"));
        s.wait_for(
            "const e = document.querySelector('#planner-export'); return !!e && e.textContent.includes('model_registry')",
            Duration::from_secs(20),
            "torchtitan's module",
        );
        s.js(
            "document.querySelector('#planner-export').scrollIntoView()",
            json!([]),
        );
        s.screenshot(&out.join(format!("torchtitan-{name}.png")));
    }
}
