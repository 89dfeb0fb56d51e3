//! Screenshots of the import box after reading a config, at desktop and phone widths (run by
//! hand: `cargo run -p headroom-e2e --example shoot_import -- OUT_DIR`).

use serde_json::json;
use std::time::Duration;

fn main() {
    let out = std::path::PathBuf::from(std::env::args().nth(1).unwrap_or("/tmp".into()));
    let yaml = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../crates/headroom-core/tests/import_configs/axolotl/qlora-fsdp-70b.yaml"),
    )
    .expect("corpus");
    let server =
        headroom_e2e::server::StaticServer::start(&headroom_e2e::dist_dir()).expect("server");
    let driver = headroom_e2e::webdriver::Driver::start();
    for (name, s) in [
        ("desktop", driver.session(1280, 900)),
        ("phone", driver.phone_session(390, 844)),
    ] {
        s.goto(&server.url("/"));
        s.wait_ready();
        s.click(&s.find("#f-group-import summary"));
        s.js(
            "document.querySelector('#f-import-text').value = arguments[0];",
            json!([yaml]),
        );
        s.click(&s.find("#f-import-read"));
        s.wait_for(
            "return !!document.querySelector('#f-import-report')",
            Duration::from_secs(20),
            "the report",
        );
        s.js(
            "document.querySelector('#f-group-import').scrollIntoView()",
            json!([]),
        );
        s.screenshot(&out.join(format!("import-{name}.png")));
        // The plans for the imported scenario, and plan 1 written as axolotl's YAML.
        s.click(&s.find("#planner-open"));
        s.wait_for(
            "return !!document.querySelector(\"button[data-target]\")",
            Duration::from_secs(30),
            "the plan's files",
        );
        if s.js(
            "return !!document.querySelector(\"button[data-target='axolotl']\")",
            json!([]),
        ) == json!(true)
        {
            s.click(&s.find("button[data-target='axolotl']"));
            s.wait_for(
                "const e = document.querySelector('#planner-export'); return !!e && e.textContent.includes('base_model')",
                Duration::from_secs(20),
                "axolotl's YAML",
            );
        }
        s.js(
            "document.querySelector('#planner-export').scrollIntoView()",
            json!([]),
        );
        s.screenshot(&out.join(format!("export-{name}.png")));
    }
}
