"""What the DeepL and LibreTranslate parsers accept, read by them and by their JSON Schemas alike."""

from __future__ import annotations

# DeepL's /v2/translate parameters accepted with no effect, each for a reason the answer cannot show:
# the model translates each text whole (split_sentences), never rewrites formatting
# (preserve_formatting), has one quality (model_type), finds tags itself (outline_detection,
# (non_)splitting_tags, tag_handling_version); billed_characters is always sent; keys are checked at
# the edge (auth_key).
DEEPL_NO_EFFECT = {
    "split_sentences",
    "preserve_formatting",
    "model_type",
    "outline_detection",
    "splitting_tags",
    "non_splitting_tags",
    "tag_handling_version",
    "show_billed_characters",
    "enable_beta_languages",
    "auth_key",
}
DEEPL_FORMALITY = ("default", "prefer_less", "prefer_more")
DEEPL_TAG_HANDLING = ("html", "xml")
# LibreTranslate's `format`.
LIBRE_FORMATS = ("text", "html")
