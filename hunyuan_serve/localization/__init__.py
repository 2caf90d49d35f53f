"""Files localized segment by segment: their formats, the pipeline, its cache and batches."""
