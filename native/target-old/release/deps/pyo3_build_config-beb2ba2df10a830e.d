/work/main/native/target-old/release/deps/pyo3_build_config-beb2ba2df10a830e.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/pyo3-build-config-0.23.5/src/lib.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/pyo3-build-config-0.23.5/src/errors.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/pyo3-build-config-0.23.5/src/impl_.rs /work/main/native/target-old/release/build/pyo3-build-config-d058a69bf5ad321f/out/pyo3-build-config-file.txt /work/main/native/target-old/release/build/pyo3-build-config-d058a69bf5ad321f/out/pyo3-build-config.txt

/work/main/native/target-old/release/deps/libpyo3_build_config-beb2ba2df10a830e.rlib: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/pyo3-build-config-0.23.5/src/lib.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/pyo3-build-config-0.23.5/src/errors.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/pyo3-build-config-0.23.5/src/impl_.rs /work/main/native/target-old/release/build/pyo3-build-config-d058a69bf5ad321f/out/pyo3-build-config-file.txt /work/main/native/target-old/release/build/pyo3-build-config-d058a69bf5ad321f/out/pyo3-build-config.txt

/work/main/native/target-old/release/deps/libpyo3_build_config-beb2ba2df10a830e.rmeta: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/pyo3-build-config-0.23.5/src/lib.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/pyo3-build-config-0.23.5/src/errors.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/pyo3-build-config-0.23.5/src/impl_.rs /work/main/native/target-old/release/build/pyo3-build-config-d058a69bf5ad321f/out/pyo3-build-config-file.txt /work/main/native/target-old/release/build/pyo3-build-config-d058a69bf5ad321f/out/pyo3-build-config.txt

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/pyo3-build-config-0.23.5/src/lib.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/pyo3-build-config-0.23.5/src/errors.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/pyo3-build-config-0.23.5/src/impl_.rs:
/work/main/native/target-old/release/build/pyo3-build-config-d058a69bf5ad321f/out/pyo3-build-config-file.txt:
/work/main/native/target-old/release/build/pyo3-build-config-d058a69bf5ad321f/out/pyo3-build-config.txt:

# env-dep:CARGO_PKG_VERSION=0.23.5
# env-dep:OUT_DIR=/work/main/native/target-old/release/build/pyo3-build-config-d058a69bf5ad321f/out
