"""Long-sequence self-attention patterns for ptmlab's Transformer (`model.backbone.attention`).

One file per pattern; each is a module that `MultiHeadAttention` hands its split heads to
(q, k, v: B×heads×T×d, the key padding, causality, the dropout) and that returns the context
(B×heads×T×d). `full` has no module: MultiHeadAttention's own scaled_dot_product_attention path.

    sliding_window   each position attends to the positions within `attention_window` of it
    longformer       sliding window + `global_tokens` that attend to and are attended by all
    bigbird          blocks: own + neighbours + `num_random_blocks` random blocks + global tokens
    linformer        keys and values projected over the sequence axis to `projected_length`

The sparse three share `blocked.py`, whose cost grows linearly with the sequence length.
"""
