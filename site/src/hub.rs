//! Fetches a public model's `config.json` from the Hugging Face Hub, in the browser.

use wasm_bindgen::JsCast;

/// Checks a Hub model id (`owner/name`) before any request is made.
pub fn check_id(id: &str) -> Result<&str, String> {
    let id = id.trim();
    let ok_part = |p: &str| {
        !p.is_empty()
            && p.len() <= 96
            && p.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
            && !p.starts_with('.')
    };
    match id.split_once('/') {
        Some((owner, name)) if ok_part(owner) && ok_part(name) => Ok(id),
        _ => Err(
            "Model id: write it as owner/name, e.g. Qwen/Qwen2.5-7B (letters, digits, - _ .)"
                .into(),
        ),
    }
}

/// The text of `config.json` of a public model, or a sentence saying why not.
pub async fn fetch_config(id: &str) -> Result<String, String> {
    let id = check_id(id)?;
    let url = format!("https://huggingface.co/{id}/resolve/main/config.json");
    let window = web_sys::window().ok_or("no browser window")?;
    let offline = crate::help::page("hub_offline");
    let response = wasm_bindgen_futures::JsFuture::from(window.fetch_with_str(&url))
        .await
        .map_err(|_| offline.clone())?;
    let response: web_sys::Response = response.dyn_into().map_err(|_| offline.clone())?;
    match response.status() {
        200 => {}
        401 | 403 => {
            return Err(format!(
                "{id} is gated or private: accept its licence on the Hub, then paste its \
                 config.json here."
            ));
        }
        404 => {
            return Err(format!(
                "{id} was not found on the Hub (check the spelling)."
            ));
        }
        s => {
            return Err(format!(
                "The Hub answered HTTP {s} for {id}; try again or paste the config."
            ));
        }
    }
    let text = response.text().map_err(|_| offline.clone())?;
    let text = wasm_bindgen_futures::JsFuture::from(text)
        .await
        .map_err(|_| offline.clone())?;
    text.as_string()
        .ok_or_else(|| "The Hub's answer was not text.".to_string())
}

#[cfg(test)]
mod tests {
    use super::check_id;

    #[test]
    fn ids_are_checked_before_any_request() {
        assert_eq!(check_id(" Qwen/Qwen2.5-7B "), Ok("Qwen/Qwen2.5-7B"));
        for bad in [
            "",
            "gpt2",
            "a/b/c",
            "../x",
            "a/<script>",
            "a/.hidden",
            "a/b?x=1",
        ] {
            assert!(check_id(bad).is_err(), "{bad}");
        }
    }
}
