"""Items (docs/PROTOCOL.md, "Items"): the record, loaders for JSONL / Parquet / CSV, and validation."""

from benchcheck.items.load import ColumnMap, LoadResult, Problem, load_items, load_path
from benchcheck.items.record import Item, fingerprints, key_video_id, video_has_frames

__all__ = [
    "ColumnMap",
    "Item",
    "LoadResult",
    "Problem",
    "fingerprints",
    "key_video_id",
    "load_items",
    "load_path",
    "video_has_frames",
]
