"""The real-model engine: loading local models, forward passes with a KV cache, drafters, the numbers of a speculation block, and the backends (torch, llama.cpp) that run them."""
