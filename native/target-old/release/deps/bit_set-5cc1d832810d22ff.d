/work/main/native/target-old/release/deps/bit_set-5cc1d832810d22ff.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/bit-set-0.8.0/src/lib.rs

/work/main/native/target-old/release/deps/libbit_set-5cc1d832810d22ff.rlib: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/bit-set-0.8.0/src/lib.rs

/work/main/native/target-old/release/deps/libbit_set-5cc1d832810d22ff.rmeta: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/bit-set-0.8.0/src/lib.rs

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/bit-set-0.8.0/src/lib.rs:
