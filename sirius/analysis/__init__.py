"""Analyses over the LLVM IR of a Program: host model, kernel facts, (later) accesses and UAR."""
