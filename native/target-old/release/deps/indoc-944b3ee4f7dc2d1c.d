/work/main/native/target-old/release/deps/indoc-944b3ee4f7dc2d1c.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/indoc-2.0.8/src/lib.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/indoc-2.0.8/src/error.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/indoc-2.0.8/src/expr.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/indoc-2.0.8/src/unindent.rs

/work/main/native/target-old/release/deps/libindoc-944b3ee4f7dc2d1c.so: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/indoc-2.0.8/src/lib.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/indoc-2.0.8/src/error.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/indoc-2.0.8/src/expr.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/indoc-2.0.8/src/unindent.rs

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/indoc-2.0.8/src/lib.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/indoc-2.0.8/src/error.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/indoc-2.0.8/src/expr.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/indoc-2.0.8/src/unindent.rs:
