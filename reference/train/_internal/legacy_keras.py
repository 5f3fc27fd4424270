"""Import TensorFlow with tf-keras as its Keras (what a TensorFlow worker needs).

TensorFlow reads `TF_USE_LEGACY_KERAS` twice: when it is imported (where the import
statement `from tensorflow.keras import ...` will look) and at the first use of the
attribute `tf.keras`. Set only in between, a process gets Keras 3 from one and tf-keras from
the other, and a tf-keras model meets a Keras 3 callback. The TensorFlow backend sets the
variable on every worker before its training function starts, as Ray's does; when the node
supervisors preload TensorFlow (the backend's `preload_modules`, to spare every worker the
seconds of its import), they must set it first, which importing this module does. Listed
before any module that imports tensorflow.
"""

import os

os.environ["TF_USE_LEGACY_KERAS"] = "1"

import tensorflow  # noqa: E402,F401 - the point of this module
