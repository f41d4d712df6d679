/work/main/native/target-old/release/deps/_native.d: src/lib.rs src/alnum.rs src/bpe.rs src/jsonkeys.rs src/langid.rs src/multi.rs src/normalize.rs src/pii.rs src/repetition.rs src/rules.rs src/text.rs src/tokenizer.rs src/urls.rs src/urls_tables.rs

/work/main/native/target-old/release/deps/lib_native.so: src/lib.rs src/alnum.rs src/bpe.rs src/jsonkeys.rs src/langid.rs src/multi.rs src/normalize.rs src/pii.rs src/repetition.rs src/rules.rs src/text.rs src/tokenizer.rs src/urls.rs src/urls_tables.rs

src/lib.rs:
src/alnum.rs:
src/bpe.rs:
src/jsonkeys.rs:
src/langid.rs:
src/multi.rs:
src/normalize.rs:
src/pii.rs:
src/repetition.rs:
src/rules.rs:
src/text.rs:
src/tokenizer.rs:
src/urls.rs:
src/urls_tables.rs:
