//! Fuzz target: httpd's request-path decoding, `Range` parsing and entity-tag matching,
//! with the properties the responses rely on.
#![no_main]

use httpd::fuzzing::{Range, etag, etag_matches, path_components, range};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    match sel % 3 {
        0 => {
            let Ok(raw) = std::str::from_utf8(rest) else {
                return;
            };
            if let Ok(comps) = path_components(raw) {
                assert!(raw.starts_with('/'));
                for c in &comps {
                    assert!(!c.is_empty() && c != "." && c != "..", "{raw:?} -> {c:?}");
                    assert!(!c.contains(['/', '\\', '\0']), "{raw:?} -> {c:?}");
                    assert!(!c.chars().any(|ch| (ch as u32) < 0x20 || ch == '\x7f'));
                    assert!(c.len() <= 255);
                }
            }
        }
        1 => {
            if rest.len() < 8 {
                return;
            }
            let (size, value) = rest.split_at(8);
            let size = u64::from_le_bytes(size.try_into().unwrap());
            let Ok(value) = std::str::from_utf8(value) else {
                return;
            };
            match range(value, size) {
                Range::Part(s, e) => assert!(s <= e && e < size, "{value:?} on {size}: {s}-{e}"),
                Range::Parts(parts) => {
                    assert!(parts.len() > 1, "{value:?} on {size}: {parts:?}");
                    for (s, e) in parts {
                        assert!(s <= e && e < size, "{value:?} on {size}: {s}-{e}");
                    }
                }
                Range::Full | Range::Unsatisfiable => {}
            }
        }
        _ => {
            if rest.len() < 16 {
                return;
            }
            let (nums, list) = rest.split_at(16);
            let mtime = u64::from_le_bytes(nums[..8].try_into().unwrap());
            let size = u64::from_le_bytes(nums[8..].try_into().unwrap());
            let Ok(list) = std::str::from_utf8(list) else {
                return;
            };
            let tag = etag(mtime, size);
            let strong = etag_matches(list, &tag, false);
            let weak = etag_matches(list, &tag, true);
            // Weak comparison accepts everything strong comparison accepts.
            assert!(!strong || weak, "{list:?} vs {tag}");
            // The tag itself always matches, in a list too.
            assert!(etag_matches(&format!("{list}, {tag}"), &tag, false));
        }
    }
});
