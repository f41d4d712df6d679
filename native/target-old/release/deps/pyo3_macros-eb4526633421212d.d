/work/main/native/target-old/release/deps/pyo3_macros-eb4526633421212d.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/pyo3-macros-0.23.5/src/lib.rs

/work/main/native/target-old/release/deps/libpyo3_macros-eb4526633421212d.so: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/pyo3-macros-0.23.5/src/lib.rs

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/pyo3-macros-0.23.5/src/lib.rs:

# env-dep:CARGO_PKG_VERSION=0.23.5
