"""Fault plans: data (`plan.py`: FaultPlan, Trigger, Action, JSON form) and their execution
(`runner.py`: PlanRun matches history events against steps; `actions.py`: what each action
does and how it picks its target).

Processes: the driver (a plan runs in the process that owns the `Cluster`, on the thread
that recorded the triggering event or on the plan's own thread). `plan.py` is pure data and
imports only `_spec`; the runner acts through the cluster object it is given.
"""
