"""The clauses of local mode, elastic training, backends, torch and the accelerators."""

from conformance._clauses._record import (
    BACKEND,
    CTRL,
    ELASTIC,
    FAIL,
    LOCAL,
    TORCH_CFG,
    TORCH_UTILS,
    C,
)

CLAUSES = [
    # ---------------------------------------------------------------- local mode
    C("local.in-driver", "MUST", "Local mode runs in the driver",
      "num_workers=0 runs the training function synchronously in the process that called "
      "fit(), with world size 1 and rank 0.", LOCAL),
    C("local.result", "MUST", "Local mode report and Result",
      "In local mode nothing is persisted: Result.metrics is the metrics of the last "
      "report (even without a checkpoint); Result.checkpoint and get_checkpoint() are the "
      "Checkpoint object passed to the last report (None when that report had none); "
      "Result.path is None; return_value is the function's.", LOCAL,
      "report(m1, checkpoint=c); report(m2) -> result.metrics == m2, result.checkpoint None",
      "Users debug their loop in local mode; they must know it forgets a checkpoint as soon "
      "as a metrics-only report follows.",
      ray_note="Differs from distributed mode, where metric-only reports are dropped and the "
      "latest checkpoint stays. Notes that say local mode keeps the last checkpoint are "
      "wrong for 2.60."),
    C("local.collectives", "MUST", "Collectives of local mode's one rank",
      "In local mode <root>.train.collective.broadcast_from_rank_zero(data) returns data "
      "and barrier() returns None at once (the training function is the only rank).",
      LOCAL, "broadcast_from_rank_zero({'a': 1}) == {'a': 1}",
      "Code that syncs ranks must run unchanged in local mode, where it is debugged."),
    C("local.exceptions", "MUST", "Local mode exceptions propagate unwrapped",
      "An exception raised by the training function in local mode propagates from fit() "
      "as the same object, not wrapped in TrainingFailedError.", LOCAL),
    # ---------------------------------------------------------------- elastic
    C("elastic.start-what-fits", "MUST", "Elastic training starts with what fits",
      "num_workers=(min, max) starts with as many workers as the cluster can hold, up to max.",
      ELASTIC),
    C("elastic.wait-below-min", "MUST", "Elastic training waits below min",
      "While fewer than min workers fit, no worker group starts; once resources appear it "
      "starts.", ELASTIC),
    C("elastic.grow", "MUST", "Elastic training grows onto new nodes",
      "When nodes are added, the group restarts at the larger size within about "
      "elastic_resize_monitor_interval_s, resumes from the latest checkpoint the controller "
      "had taken (each rank's newest returned report may still be queued when the group "
      "stops: Ray 2.60 queues one report per rank), and the resize is not charged to "
      "max_failures.", ELASTIC),
    C("elastic.steady", "MUST", "An elastic group is left alone while nothing changes",
      "While the cluster's resources stay the same, the monitor's checks (at most one per "
      "elastic_resize_monitor_interval_s) neither restart nor resize a running elastic "
      "group: the run ends in the one attempt it started with.", ELASTIC +
      ":make_decision_for_running_worker_group",
      "num_workers=(1, 4) on 1 node x 2 CPUs for five monitor intervals -> one attempt of "
      "2 workers",
      "Each resize is a full restart from the latest checkpoint: one at every tick would "
      "lose the progress since that checkpoint again and again."),
    C("elastic.monitor-interval", "MUST", "A running group is considered for a resize once per interval",
      "A running elastic group is first considered for a resize elastic_resize_monitor_interval_s "
      "after it started, then again every interval: resources that appear while the group "
      "starts (after its size was chosen) are not used before the interval has passed, so a "
      "run shorter than the interval ends at the size it started with; a node added after "
      "the first consideration found nothing is used at a later one.", ELASTIC +
      ":make_decision_for_running_worker_group (worker_group_state.start_time, "
      "_latest_monitor_time)",
      "num_workers=(1, 4), interval 60 s, a node added during on_start, a 4-step run -> one "
      "attempt of 2 workers",
      "A resize restarts the group from its latest checkpoint; the interval is what bounds "
      "how often a growing cluster costs that."),
    # ---------------------------------------------------------------- backend
    C("backend.hooks", "MUST", "A custom Backend's hooks run around the training function",
      "For a BackendConfig subclass whose backend_cls is a Backend subclass, passed as "
      "DataParallelTrainer(backend_config=...): on_start and then on_training_start run once "
      "per worker group, in one process that is none of the workers, after the workers "
      "started and before the training function; what functions they run on the workers "
      "(execute, execute_single, execute_async with the root's get) set is seen by the "
      "training function, and get_context() works in them; the training function runs "
      "inside train_func_context() on every worker; on_shutdown runs after every rank "
      "returned, with the workers still up (its functions run in the same worker processes, "
      "after train_func_context exited).", BACKEND,
      "class B(Backend): def on_start(self, wg, cfg): wg.execute(set_env, 'X', '1')",
      "Every framework integration (torch, XGBoost, LightGBM, JAX, TensorFlow) is a backend; "
      "a third-party backend must work on any implementation of the contract."),
    C("backend.worker-group", "MUST", "The worker group a backend gets",
      "The worker_group passed to the hooks has len() == num_workers; execute(fn) returns "
      "fn's values in world-rank order; get_workers() lists the workers in world-rank "
      "order with metadata.pid (the worker's process), metadata.node_ip and "
      "distributed_context.world_rank / local_rank; get_resources_per_worker() is the "
      "resources of one worker ({'CPU': 1} by default).", BACKEND,
      "wg.execute_single(0, get_address_and_port)"),
    C("backend.on-start-error", "MUST", "An on_start that raises in the driver fails at once",
      "An exception raised by Backend.on_start itself fails fit() with ControllerError whose "
      "controller_failure is that exception; the training function never runs.", BACKEND,
      "on_start raises ValueError -> ControllerError(ValueError), no retry",
      "A backend rejects a bad configuration in on_start (TorchConfig(init_method='bad')); "
      "retrying cannot help."),
    C("backend.on-shutdown-error", "MUST", "An on_shutdown that raises fails a run that succeeded",
      "When every rank's training function returned and Backend.on_shutdown then raises, "
      "fit() raises ControllerError whose controller_failure is that exception; the hook "
      "ran once, after the training functions.", BACKEND +
      "; python/ray/train/v2/_internal/execution/controller/controller.py:513-518",
      "on_shutdown raises RuntimeError -> ControllerError(RuntimeError)",
      "A backend that cannot tear down cleanly (a process group that hangs, a tracker that "
      "does not stop) must not let the run report success."),
    C("backend.worker-error", "MUST", "A backend function that raises on a worker fails fit()",
      "An exception raised on a worker by a function on_start runs there fails fit() with "
      "ControllerError whose controller_failure is an instance of the worker's exception "
      "class; the training function never runs.", BACKEND,
      "ray.get(wg.execute_async(fn_raising_KeyError)) -> ControllerError(KeyError)",
      ray_note="Ray raises it at once (a RayTaskError(KeyError) is not a retryable controller "
      "error); the reference retries the group start twice first, since a rendezvous can "
      "fail by chance, then raises the same error."),
    C("backend.worker-death-retried", "MUST", "A worker that dies while the group starts is retried",
      "A worker process that dies while the worker group starts (here: in a function "
      "Backend.on_start runs on it, before any training function) is a start failure, "
      "charged to FailureConfig.controller_failure_limit (default -1: unlimited), never to "
      "max_failures: a group is started again and, when it starts, the run succeeds even "
      "with max_failures=0. With controller_failure_limit=0 fit() raises ControllerError "
      "and no training function runs.", BACKEND + "; " + FAIL + ":RETRYABLE_CONTROLLER_ERRORS",
      "rank 1 exits in the first on_start, max_failures=0 -> a second group trains, fit() "
      "succeeds",
      "A node that loses a worker while the group is set up (a preempted host, an OOM kill "
      "at import) must not end a run that has not started training."),
    C("backend.controller-error-shutdown", "MUST", "A controller error shuts the backend down",
      "When the run fails in the controller while a group runs (a UserCallback's after_report "
      "raises), fit() raises ControllerError whose controller_failure is that exception, "
      "and Backend.on_shutdown ran once, after on_start and on_training_start.", BACKEND +
      "; " + CTRL + ":_shutdown",
      "UserCallback.after_report raises RuntimeError -> ControllerError(RuntimeError); "
      "hooks on_start, on_training_start, on_shutdown"),
    # ---------------------------------------------------------------- torch
    C("torch.config", "MUST", "TorchConfig fields and defaults",
      "TorchConfig(backend=None, init_method='env', timeout_s=1800).", TORCH_CFG,
      "TorchConfig().init_method == 'env'"),
    C("torch.process-group", "MUST", "Workers run in one torch.distributed process group",
      "Under TorchTrainer every worker's training function runs inside an initialized "
      "torch.distributed default process group whose world size and rank are the Train "
      "context's; with no GPU the backend is gloo (an all_reduce across ranks works).",
      TORCH_CFG, "dist.get_world_size() == get_context().get_world_size()",
      "DDP and every collective rely on it; a wrong rank silently corrupts gradients."),
    C("torch.env", "MUST", "torchrun-style environment variables",
      "Workers see RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE and NODE_RANK equal to the "
      "context's values, and MASTER_ADDR / MASTER_PORT identical on every rank.", TORCH_CFG,
      "os.environ['RANK'] == str(get_context().get_world_rank())"),
    C("torch.device", "MUST", "get_device on CPU workers",
      "On a worker without GPUs get_device() is the cpu device and get_devices() is [cpu].",
      TORCH_UTILS),
    C("torch.prepare-model", "MUST", "prepare_model wraps in DDP",
      "With more than one worker prepare_model(model) returns a DistributedDataParallel "
      "wrapper; parallel_strategy=None returns the unwrapped module.", TORCH_UTILS),
    C("torch.prepare-data-loader", "MUST", "prepare_data_loader shards the data",
      "With more than one worker prepare_data_loader adds a DistributedSampler with "
      "num_replicas = world size and rank = world rank that keeps the loader's shuffle "
      "setting; the ranks' batches are disjoint and together cover the dataset.",
      TORCH_UTILS),
    # ---------------------------------------------------------------- accelerators
    C("accelerator.gpu-ids", "MUST", "Each GPU worker sees the GPUs it holds",
      "With use_gpu=True and a backend that does not share devices (DataParallelTrainer's "
      "BackendConfig), each worker's CUDA_VISIBLE_DEVICES lists exactly the GPU ids of its "
      "bundle: two workers of one GPU each on a 2-GPU node see '0' and '1' (one each); "
      "resources_per_worker={'GPU': 2} gives one worker '0,1'. The ids are the node's "
      "logical GPU ids, so the rule holds for GPUs a cluster declares as for real ones.",
      "python/ray/_private/accelerators/nvidia_gpu.py",
      "DataParallelTrainer(fn, scaling_config=ScalingConfig(num_workers=2, use_gpu=True))"),
    C("accelerator.gpu-share", "MUST", "TorchTrainer shares a node's GPUs among its workers",
      "With TorchTrainer (TorchConfig's backend has share_cuda_visible_devices=True) and "
      "GPU workers, every worker's CUDA_VISIBLE_DEVICES is the sorted union of the GPU ids "
      "the run's workers hold on its node, set before the training function starts: two "
      "workers of one GPU each on a 2-GPU node both see '0,1'.",
      "python/ray/train/v2/_internal/callbacks/accelerators.py",
      "TorchTrainer(fn, scaling_config=ScalingConfig(num_workers=2, use_gpu=True))"),
    C("accelerator.fractional-gpu", "MUST", "Fractional GPUs pack workers onto one GPU",
      "resources_per_worker={'GPU': 0.5} with use_gpu=True puts two workers on one GPU of a "
      "1-GPU node; both see CUDA_VISIBLE_DEVICES '0' (with TorchTrainer's sharing too).",
      "python/ray/_private/accelerators/nvidia_gpu.py",
      "ScalingConfig(num_workers=2, use_gpu=True, resources_per_worker={'GPU': 0.5})"),
    C("accelerator.rocm-ids", "SHOULD", "AMD GPUs are named in HIP_VISIBLE_DEVICES",
      "On a node whose GPUs are AMD (ROCm), a GPU worker's device ids go to "
      "HIP_VISIBLE_DEVICES, as Ray's AMDGPUAcceleratorManager writes them, and "
      "CUDA_VISIBLE_DEVICES is not set for them.",
      "python/ray/_private/accelerators/amd_gpu.py",
      "DataParallelTrainer(fn, scaling_config=ScalingConfig(num_workers=2, use_gpu=True)) "
      "on a ROCm node"),
    C("accelerator.torch-devices", "MUST", "get_device() is the worker's GPU by position",
      "In a TorchTrainer GPU worker get_devices() lists, for each GPU id the worker holds, "
      "cuda:<the id's position in CUDA_VISIBLE_DEVICES>, and get_device() is the first: two "
      "workers sharing '0,1' compute on cuda:0 and cuda:1, a worker of GPU: 2 on "
      "[cuda:0, cuda:1], two workers of GPU: 0.5 both on cuda:0. Where the GPUs are declared "
      "but torch reaches no CUDA device, an implementation may instead give every worker "
      "[cpu] (the reference does, so GPU code runs on simulated nodes; Ray names the cuda "
      "devices regardless).",
      "python/ray/air/_internal/device_manager/nvidia_gpu.py",
      "TorchTrainer(fn, scaling_config=ScalingConfig(num_workers=2, use_gpu=True)); "
      "get_devices()"),
    C("accelerator.prepare-on-device", "MUST", "prepare_model and prepare_data_loader use the "
      "worker's device",
      "In a GPU worker prepare_model(model) returns the model with its parameters on "
      "get_device() (cuda:0 for a worker of one real GPU) and the loader of "
      "prepare_data_loader yields batches on that device. On declared GPUs that torch cannot "
      "reach, where get_device() still names cuda, the check is skipped: nothing can be "
      "moved there.",
      "python/ray/train/v2/torch/train_loop_utils.py",
      "TorchTrainer(fn, scaling_config=ScalingConfig(num_workers=1, use_gpu=True)); "
      "prepare_model(nn.Linear(4, 2)); prepare_data_loader(DataLoader(...))"),
    C("accelerator.nccl", "MUST", "TorchTrainer's GPU workers join an NCCL process group",
      "With use_gpu=True and TorchConfig's default backend, the workers' torch.distributed "
      "group is NCCL, and a collective on tensors on get_device() completes. Checked only "
      "where the GPUs are real (NCCL needs CUDA devices); skipped, saying so, on declared "
      "ones.",
      "python/ray/train/torch/config.py",
      "TorchTrainer(fn, scaling_config=ScalingConfig(num_workers=1, use_gpu=True)); "
      "dist.get_backend()"),
    C("accelerator.type", "MUST", "accelerator_type places workers on nodes of that type",
      "ScalingConfig(accelerator_type='X') adds the resource 'accelerator_type:X' (0.001 per "
      "worker) to each worker's bundle, so the workers run only on nodes that publish it: "
      "on a node of A100 GPUs and one of T4 GPUs, fits asking for A100 run on the first "
      "and a fit asking for T4 on the second.",
      "python/ray/air/config.py",
      "ScalingConfig(num_workers=2, use_gpu=True, accelerator_type='A100')"),
    C("accelerator.tpu-chips", "MUST", "A TPU worker sees the chips it holds",
      "With use_tpu=True a worker holding one chip of a 4-chip TPU host sees that chip's id "
      "in TPU_VISIBLE_CHIPS with TPU_CHIPS_PER_HOST_BOUNDS '1,1,1'; one holding two "
      "(resources_per_worker={'TPU': 2}) sees two ids with '1,2,1'; TPU_HOST_BOUNDS is "
      "'1,1,1' (one host) for both. The chips are declared (simulated) here; the rule is "
      "the same on a TPU VM.",
      "python/ray/_private/accelerators/tpu.py",
      "ScalingConfig(num_workers=1, use_tpu=True, resources_per_worker={'TPU': 2})"),
]
