"""`reference.data.dataset`, as `ray.data.dataset`: where `MaterializedDataset` lives."""

from reference.data._dataset import Dataset, MaterializedDataset, Schema

__all__ = ["Dataset", "MaterializedDataset", "Schema"]
