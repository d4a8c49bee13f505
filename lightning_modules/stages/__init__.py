"""The stages `ptmlab.run` calls (`conf/stage/*.yaml` `entry`), on top of everything else:
pretrain, finetune, multitask, compress, probe, with the Lightning modules they train.
Nothing else in lightning_modules imports them."""
