"""Translation memories: TMX and CSV/TSV files read and written, similarity, the `memory` command."""
