"""Ray Data in local mode (clause `data.local`): get_dataset_shard with num_workers=0, on
the data probe of `check_data` (`_fit`). Two fits: "local", DataParallelTrainer(num_workers=0)
with {"train": from_items(7 rows), "lazy": a callable building from_items(5 rows)}, and
"local-none", the same with no datasets."""

from __future__ import annotations

from conformance import assertions, data_probe
from conformance.catalogue import clause
from conformance.checks.check_data import _fit
from conformance.scenarios import shared

LOCAL = {"train": 7, "lazy": 5, "lazy_first": 500}
LOCAL_ERROR = "Dataset shard {name} not found."


def _local_run(impl, with_datasets: bool = True):
    def build(impl):
        d = impl.data

        def datasets(j):
            if not with_datasets:
                return None
            return {"train": d.from_items(data_probe.items(LOCAL["train"])),
                    "lazy": data_probe.MakeDataset(d.__name__, j, LOCAL["lazy"],
                                                   LOCAL["lazy_first"])}

        outcome, journal = _fit(impl, "local" if with_datasets else "local-none",
                                impl.DataParallelTrainer, 0, datasets)
        setting = (f"{impl.name}: DataParallelTrainer(num_workers=0), datasets "
                   + (f"{{'train': from_items({LOCAL['train']} rows), 'lazy': a callable "
                      f"returning from_items({LOCAL['lazy']} rows)}}" if with_datasets
                      else "None"))
        return outcome, journal, setting

    return shared(impl, "data-local" if with_datasets else "data-local-none", build)


@clause("data.local")
def check_local_mode(impl):
    outcome, journal, setting = _local_run(impl)
    assertions.succeeded(outcome, setting)
    (e,) = journal.events("local")
    want = {"train": list(range(LOCAL["train"])),
            "lazy": list(range(LOCAL["lazy_first"], LOCAL["lazy_first"] + LOCAL["lazy"]))}
    for name, ids in want.items():
        assertions.equal(e[name]["is_dataset"], True,
                         f"get_dataset_shard({name!r}) in local mode is a Dataset "
                         f"(got {e[name]['type']})", setting)
        assertions.equal(sorted(e[name]["ids"]), ids,
                         f"ids of get_dataset_shard({name!r}) in local mode (all rows)", setting)
    assertions.equal(len(journal.events("resolved")), 1, "calls of the 'lazy' callable",
                     setting)
    _local_error(e["unknown"], data_probe.UNKNOWN,
                 f"get_dataset_shard({data_probe.UNKNOWN!r}) in local mode", setting)
    _local_error(e["no_name"], None, "get_dataset_shard() (no name) in local mode", setting)
    outcome, journal, setting = _local_run(impl, with_datasets=False)
    assertions.succeeded(outcome, setting)
    (e,) = journal.events("local")
    _local_error(e["unknown"], data_probe.UNKNOWN,
                 f"get_dataset_shard({data_probe.UNKNOWN!r}) in local mode without datasets",
                 setting)


def _local_error(seen: list | None, name, what: str, setting: str) -> None:
    """seen ([type, message] or None) is an AssertionError whose message names the dataset."""
    __tracebackhide__ = True
    if seen is None or seen[0] != "AssertionError" or str(name) not in str(seen[1]):
        raise AssertionError(f"{what} raised {seen!r} (None: returned), expected an "
                             f"AssertionError naming {str(name)!r} (Ray: "
                             f"{LOCAL_ERROR.format(name=name)!r}) [{setting}]")
