//! The hybrid stream-K plan (`rcute_kernel::stream_k`): over a few hundred plans every
//! (tile, k-tile) is covered exactly once, a CTA's range covers parts of at most two tiles
//! and a tile has at most three contributors; and the device walk, compiled as host C++,
//! gives every CTA the items, contributors and slots of the host model.

use rcute_kernel::stream_k::{host_code, StreamKPlan};
use std::collections::HashMap;
use std::io::Write;
use std::process::Command;

/// A few hundred plans: tile counts around one to five waves of several grids, k-tiles
/// from 1 to 80.
fn plans() -> Vec<StreamKPlan> {
    let mut v = vec![];
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    let mut next = |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    for ctas in [1u32, 2, 7, 64, 114, 132] {
        for _ in 0..45 {
            let work = 1 + next(u64::from(ctas) * 5);
            let k_tiles = [1, 2, 3, 5, 64, 1 + next(80) as u32][next(6) as usize];
            v.push(StreamKPlan::new(work, ctas, k_tiles).unwrap());
        }
    }
    // bf16 4096^3 (128x256 tiles), 4096x14336x4096, 2048^3 on 132 SMs
    for (work, k) in [(512, 64), (1792, 64), (128, 32), (133, 64), (131, 64), (265, 1)] {
        v.push(StreamKPlan::new(work, 132, k).unwrap());
    }
    // Finer cuts (`sk<N>`): 8192^3 at 128x128 tiles (4096 tiles of 64 k-tiles: 4 stream-K
    // tiles) and random plans, 3 to 16 ranges a tile
    for parts in [3, 4, 8, 16] {
        v.push(StreamKPlan::with_parts(4096, 132, 64, parts).unwrap());
        for ctas in [7u32, 64, 132] {
            for _ in 0..12 {
                let work = 1 + next(u64::from(ctas) * 5);
                let k_tiles = [1, 2, 3, 5, 64, 1 + next(80) as u32][next(6) as usize];
                v.push(StreamKPlan::with_parts(work, ctas, k_tiles, parts).unwrap());
            }
        }
    }
    v
}

#[test]
fn finer_cuts_spread_the_last_wave_over_more_ctas() {
    // 8192^3, 128x128 tiles: 4 stream-K tiles; 2 ranges a tile on 8 CTAs (32 k-tiles each),
    // 4 on 16 (16 each), 8 on 32 (8 each)
    for (parts, units, base) in [(2, 8, 32), (4, 16, 16), (8, 32, 8)] {
        let p = StreamKPlan::with_parts(4096, 132, 64, parts).unwrap();
        assert_eq!(
            (p.sk_tiles, p.units, p.base(), p.extra()),
            (4, units, base, 0),
            "{parts}"
        );
    }
    assert_eq!(
        StreamKPlan::new(4096, 132, 64),
        StreamKPlan::with_parts(4096, 132, 64, 2)
    );
}

#[test]
fn every_iteration_is_covered_exactly_once() {
    for p in plans() {
        let mut seen: HashMap<(u64, u32), u32> = HashMap::new();
        let mut per_tile: HashMap<u64, Vec<u32>> = HashMap::new();
        for cta in 0..p.ctas {
            let items = p.items(cta);
            let sk: Vec<_> = items.iter().filter(|i| i.work >= p.dp_work()).collect();
            assert!(sk.len() <= 2, "{p:?} CTA {cta}: {} stream-K parts", sk.len());
            let sk_iters: u32 = sk.iter().map(|i| i.k_end - i.k_begin).sum();
            assert!(sk_iters <= p.k_tiles, "{p:?} CTA {cta}: {sk_iters} iterations");
            for it in &items {
                assert!(it.k_begin < it.k_end || p.k_tiles == 0, "{p:?}: empty item {it:?}");
                for k in it.k_begin..it.k_end {
                    *seen.entry((it.work, k)).or_default() += 1;
                }
                if it.k_end == it.k_begin {
                    *seen.entry((it.work, 0)).or_default() += 1;
                }
                per_tile.entry(it.work).or_default().push(cta);
            }
        }
        let k_span = p.k_tiles.max(1);
        assert_eq!(
            seen.len() as u64,
            p.work * u64::from(k_span),
            "{p:?}: iterations missing"
        );
        assert!(seen.values().all(|&c| c == 1), "{p:?}: an iteration covered twice");
        // a range is at least `base` k-tiles: a tile has at most k_tiles / base + 1
        // contributors (3 with two ranges a tile), a whole tile one
        let most = u64::from(p.k_tiles).div_ceil(p.base().max(1)) + 1;
        for (work, ctas) in per_tile {
            let bound = if work >= p.dp_work() { most } else { 1 };
            assert!(
                ctas.len() as u64 <= bound,
                "{p:?}: work {work} has contributors {ctas:?}"
            );
            if work >= p.dp_work() {
                let t = (work - p.dp_work()) as u32;
                let (first, last) = p.contributors(t);
                assert_eq!(ctas, (first..=last).collect::<Vec<_>>(), "{p:?} tile {t}");
                let slots: Vec<u32> = ctas.iter().map(|&u| p.slot(u, t)).collect();
                assert!(slots.iter().all(|&s| (s as usize) < p.slots()), "{p:?}");
            }
        }
    }
}

#[test]
fn slots_are_unique_per_launch() {
    for p in plans() {
        let mut used = std::collections::HashSet::new();
        for cta in 0..p.units {
            for it in p.items(cta).iter().filter(|i| i.work >= p.dp_work()) {
                let t = (it.work - p.dp_work()) as u32;
                assert!(used.insert(p.slot(cta, t)), "{p:?}: slot reused");
            }
        }
    }
}

/// A host C++ compiler, or `None` (the test then says so and skips).
fn cxx() -> Option<String> {
    [
        std::env::var("CXX").unwrap_or_default(),
        "g++".into(),
        "c++".into(),
        "clang++".into(),
    ]
    .into_iter()
    .find(|c| {
        !c.is_empty()
            && Command::new(c)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
    })
}

#[test]
fn the_device_walk_equals_the_host_model() {
    let Some(cxx) = cxx() else {
        eprintln!("skipped: no host C++ compiler (set CXX) to compile the stream-K walk");
        return;
    };
    let dir = std::env::temp_dir().join(format!("rcute_sk_walk_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("walk.cpp");
    let exe = dir.join("walk");
    // Reads plans (total_work sk_tiles units k_tiles ctas) from stdin; prints, per CTA, its
    // items (work k_begin k_end), then per stream-K tile its first and last unit and the slot
    // of every unit in between.
    let driver = format!(
        "#include <cstdio>\n{}\nint main() {{\n\
         unsigned long long work, ctas; int sk, units, kt;\n\
         while (std::scanf(\"%llu %d %d %d %llu\", &work, &sk, &units, &kt, &ctas) == 5) {{\n\
         \x20 for (unsigned long long c = 0; c < ctas; ++c) {{\n\
         \x20   rc_walk w(work, sk, units, kt, c, ctas);\n\
         \x20   std::printf(\"cta %llu:\", c);\n\
         \x20   for (int j = 0; j < w.items; ++j) std::printf(\" %llu/%d/%d\", w.work(j), w.k_begin(j), w.k_end(j));\n\
         \x20   std::printf(\" next %d\\n\", w.work(w.items) == ~0ull ? 1 : 0);\n\
         \x20 }}\n\
         \x20 rc_walk w(work, sk, units, kt, 0, ctas);\n\
         \x20 for (int t = 0; t < sk; ++t) {{\n\
         \x20   std::printf(\"tile %d: %d %d:\", t, w.first_unit(t), w.last_unit(t));\n\
         \x20   for (int u = w.first_unit(t); u <= w.last_unit(t); ++u) std::printf(\" %d\", w.slot(u, t));\n\
         \x20   std::printf(\"\\n\");\n\
         \x20 }}\n\
         }}\n}}\n",
        host_code("rc")
    );
    std::fs::write(&src, driver).unwrap();
    let out = Command::new(&cxx)
        .args(["-O1", "-std=c++17", "-o"])
        .arg(&exe)
        .arg(&src)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "host compile of the walk failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let plans = plans();
    let mut input = String::new();
    let mut want = String::new();
    for p in &plans {
        let [sk, units] = p.device_args();
        input += &format!("{} {sk} {units} {} {}\n", p.work, p.k_tiles, p.ctas);
        for c in 0..p.ctas {
            want += &format!("cta {c}:");
            for it in p.items(c) {
                want += &format!(" {}/{}/{}", it.work, it.k_begin, it.k_end);
            }
            want += " next 1\n";
        }
        for t in 0..p.sk_tiles {
            let (f, l) = p.contributors(t);
            want += &format!("tile {t}: {f} {l}:");
            for u in f..=l {
                want += &format!(" {}", p.slot(u, t));
            }
            want += "\n";
        }
    }
    let mut child = Command::new(&exe)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let got = child.wait_with_output().unwrap();
    let got = String::from_utf8(got.stdout).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    for (i, (g, w)) in got.lines().zip(want.lines()).enumerate() {
        assert_eq!(g, w, "line {i} of the walk's output");
    }
    assert_eq!(got.lines().count(), want.lines().count());
    println!("{} plans, {} lines equal", plans.len(), want.lines().count());
}
