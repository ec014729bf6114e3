"""The values a kernel variant is made of: its source, signature, arguments, launch
configuration, LLVM pass pipeline and tunables. Imports nothing above it."""
