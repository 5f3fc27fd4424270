"""prepare_dataset_shard: a tf.data.Dataset that is already one worker's shard."""

from __future__ import annotations

import tensorflow as tf


def prepare_dataset_shard(tf_dataset_shard: tf.data.Dataset) -> tf.data.Dataset:
    """`tf_dataset_shard` with TensorFlow's auto-sharding turned off (the data are already
    split across the workers, e.g. a shard from `get_dataset_shard`; a strategy sharding it
    again would give each worker 1/N of its 1/N) and prefetching with AUTOTUNE, as Ray's."""
    if not isinstance(tf_dataset_shard, tf.data.Dataset):
        raise TypeError(f"prepare_dataset_shard(tf_dataset_shard={tf_dataset_shard!r}): "
                        "expected a tf.data.Dataset, e.g. tf.data.Dataset.from_tensor_slices"
                        "(...) or a dataset shard's to_tf(...).")
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    return tf_dataset_shard.with_options(options).prefetch(tf.data.AUTOTUNE)
