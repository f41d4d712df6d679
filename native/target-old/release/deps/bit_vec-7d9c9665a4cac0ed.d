/work/main/native/target-old/release/deps/bit_vec-7d9c9665a4cac0ed.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/bit-vec-0.8.0/src/lib.rs

/work/main/native/target-old/release/deps/libbit_vec-7d9c9665a4cac0ed.rlib: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/bit-vec-0.8.0/src/lib.rs

/work/main/native/target-old/release/deps/libbit_vec-7d9c9665a4cac0ed.rmeta: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/bit-vec-0.8.0/src/lib.rs

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/bit-vec-0.8.0/src/lib.rs:
