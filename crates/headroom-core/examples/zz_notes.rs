fn main() {
    let named = headroom_core::codec::named_scenarios();
    let want: Vec<String> = std::env::args().skip(1).collect();
    for f in headroom_core::claims::embedded().into_iter().flatten() {
        if !want.is_empty() && !want.contains(&f.id) { continue; }
        for (i, r) in headroom_core::claims::evaluate(&f, &named).into_iter().enumerate() {
            match r {
                Ok(r) => println!("{} #{} [{} {:.3e} vs {:.3e}] {}\n", f.id, i + 1, r.claim.verdict.id(), r.claim.claimed, r.computed, r.note),
                Err(e) => println!("{} #{} ERR {e}", f.id, i + 1),
            }
        }
    }
}
