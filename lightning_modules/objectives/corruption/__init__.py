"""Pure, seeded corruption functions on token tensors, grouped by what they corrupt:

    word_spans   which positions a masked LM predicts: whole words (WWM) and SpanBERT's
                 geometric spans, plus the span boundaries the span-boundary objective reads
    denoising    BART's noising of a sequence: token masking, token deletion, text infilling,
                 sentence permutation, document rotation (each changes a 1-D sequence)
    sentinels    T5's span corruption with sentinel tokens, MASS's contiguous span

Every function takes an explicit `torch.Generator`, draws nothing else at random and leaves its
inputs untouched, so a seed fixes the result and the statistics tests can measure it.
BERT's token masking itself lives in `lightning_modules.objectives.masking`.
"""
