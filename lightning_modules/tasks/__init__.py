"""Downstream tasks: what is learned after pre-training (GLUE, SentEval, any local table).

The interface the finetune stage uses
-------------------------------------
Config: `task=glue/<cola|sst2|mrpc|stsb|qqp|mnli|qnli|rte|wnli>`, `task=senteval/<mr|cr|subj|mpqa>`
or `task=tabular` selects `conf/task/...yaml`:

    name, display_name        sst2, SST-2
    kind                      classification | regression (STS-B)
    num_labels                head size (1 for regression; tabular: null = inferred)
    labels                    raw file values in class-index order (= nyu-mll/glue's ClassLabel
                              order); null for regression, or inferred (tabular)
    label_names               human names of the classes
    metrics, main_metric      e.g. [f1, accuracy], f1 (names as HF `evaluate`'s glue metric)
    glue_metrics              what the task contributes to the GLUE score (mean of these)
    eval_metric_suffix        eval split -> metric-name suffix (mnli: {dev_mismatched: _mm})
    submission_files          test split -> GLUE submission file name
    max_train_samples, max_eval_samples   null, or the first N rows (as run_glue.py)
    max_length                128
    data                      a `_target_` reader node with `.read() -> TaskData`

Python (`from lightning_modules.tasks.spec import load_task` etc.):

    task = load_task(cfg.task)            # spec.LoadedTask; DataError/ConfigError on bad input
    task.spec                             # spec.TaskSpec (kind, labels, num_labels, metrics, ...)
    task.num_labels                       # head size: use this, not cfg.task.num_labels (inferred
                                          # for tabular)
    task.train, task.eval_splits, task.test_splits   # data.task_data.Split (examples have
                                          # texts (1- or 2-tuple), label (int class / float score /
                                          # None), row, id)
    task.spec.metric_key("accuracy", "dev_mismatched") -> "accuracy_mm"
    task.spec.to_dict() / TaskSpec.from_dict(d)   # JSON round trip (a saved task model's manifest)

    enc = encoding.PairEncoder(tokenizer, causal=backbone.is_causal, max_length=task.spec.max_length)
    items = enc.encode_split(split); batch = enc.collate(items[:32])
        # batch: input_ids, attention_mask, token_type_ids (B×T), pool_index (B: [CLS]=0 for
        # encoders, the <extract> position for causal decoders), example_index (B), labels (B;
        # long, or float for regression; absent on unlabelled splits)
    dm = datamodule.TaskDataModule(task, tokenizer, causal=..., batch_size=32, seed=cfg.seed)
        # a LightningDataModule: train (shuffled), val (one loader per eval split, in
        # task.data.eval_splits order), predict (eval then test splits), `split_names_*`

    metrics.compute_metrics(task.spec.metrics, preds, labels, num_labels=task.num_labels)
        # {"f1": .., "accuracy": ..}; preds = class indices, B×C logits, or scores
    metrics.prediction_stats(preds, labels)   # {constant_prediction, majority_rate, ...}: put it
        # in summary.json as `prediction_stats` so the leaderboard can flag degenerate runs
    metrics.glue_task_score(task_name, metrics) / metrics.glue_average({task: score})

    predictions.write_predictions(path, split, preds, task.spec)    # dev/test TSV: index, prediction, label
    predictions.write_glue_submission(folder, split, preds, task.spec)  # GLUE format (CoLA.tsv, MNLI-m.tsv ...)

Readers (`lightning_modules/data/`): glue.GlueReader (original TSV layout, or source=hf for
nyu-mll/glue), senteval.SentEvalReader, tabular.TabularReader. Compose-time checks of the task
node (kind/num_labels/labels/metrics, and any `<node>.head.{kind,num_labels}` that must fit the
task) live torch-free in ptmlab.contracts.task_checks and run through ptmlab.config.CHECKS.
"""
