"""The ptmlab overrides that train as bench/hf_recipe.py's loop does (the plain-PyTorch references
behind the WNUT-17 and SQuAD thresholds): length-grouped batches in transformers' order, AdamW
0.9/0.999/1e-8 with weight decay 0.01 on matrices, linear warm-up over 10 % of the steps,
clipping at 1.0; no progress bar or step checkpoints while a threshold run is timed."""

# not hyper-parameters: what a timed threshold run leaves out
QUIET = ["trainer.enable_progress_bar=false", "checkpoint_every_n_steps=0"]

TRAINER_RECIPE = [
    "stage.group_by_length=true",
    "optimizer.betas=[0.9,0.999]",
    "optimizer.eps=1e-8",
    "optimizer.weight_decay=0.01",
    "scheduler=linear_warmup",
    "scheduler.warmup_ratio=0.1",
    "trainer.gradient_clip_val=1.0",
    *QUIET,
]
