"""Models and their numerics: tiny Qwen2 models and tokenizers, prompt encoding, precision choice, GGUF conversion."""
