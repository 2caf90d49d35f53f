"""TMX files as the real tools write them, read into units; malformed ones refused by line; exports valid."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from lxml import etree

from hunyuan_serve.memory.pairs import memory_format, read_memory_file, write_memory_file
from hunyuan_serve.memory.tmx import MemoryFileInvalid, read_tmx, write_tmx
from hunyuan_serve.storage.memory import Unit

DTD = Path(__file__).with_name("tmx14.dtd")

# Weblate exports its translation memory with translate-toolkit's tmxfile (translate/storage/tmx.py):
# its skeleton, its header's attributes, Weblate's own language codes (zh_Hans), a note a unit.
WEBLATE = """<?xml version="1.0" encoding="utf-8"?>
<!DOCTYPE tmx SYSTEM "tmx14.dtd">
<tmx version="1.4">
<header creationtool="Translate Toolkit" creationtoolversion="3.13.0" segtype="sentence" o-tmf="UTF-8"
 adminlang="en" srclang="en" datatype="PlainText"/>
<body>
<tu><note>webui/txt2img</note><tuv xml:lang="en"><seg>Sampling steps</seg></tuv>
<tuv xml:lang="zh_Hans"><seg>迭代步数</seg></tuv></tu>
<tu><tuv xml:lang="en"><seg>Batch count</seg></tuv><tuv xml:lang="zh_Hans"><seg>总批次数</seg></tuv></tu>
</body>
</tmx>
"""

# OmegaT's project_save.tmx: upper-case regional tags, TMX 1.1's DOCTYPE, the translator's ids and
# dates on the target variant, an alternative translation keyed by <prop>s.
OMEGAT = """<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE tmx SYSTEM "tmx11.dtd">
<tmx version="1.4">
  <header creationtool="OmegaT" o-tmf="OmegaT TMX" adminlang="EN-US" datatype="plaintext"
   creationtoolversion="6.0.1_0_a6f4b2e2" segtype="sentence" srclang="EN-US"/>
  <body>
<!-- Default translations -->
    <tu>
      <tuv xml:lang="EN-US">
        <seg>Save the image</seg>
      </tuv>
      <tuv xml:lang="ZH-CN" changeid="alice" changedate="20240301T101500Z" creationid="alice"
       creationdate="20240301T101500Z">
        <seg>保存图像</seg>
      </tuv>
    </tu>
<!-- Alternative translations -->
    <tu>
      <prop type="file">ui.json</prop>
      <prop type="id">extras.upscale</prop>
      <tuv xml:lang="EN-US">
        <seg>Upscale</seg>
      </tuv>
      <tuv xml:lang="ZH-CN" changeid="bob" changedate="20240302T090000Z">
        <seg>放大</seg>
      </tuv>
    </tu>
  </body>
</tmx>
"""

# Inline codes (an OmegaT level2 export, a CAT tool's placeholders): their text is the native markup.
INLINE = """<?xml version="1.0" encoding="UTF-8"?>
<tmx version="1.4">
  <header creationtool="OmegaT" o-tmf="OmegaT TMX" adminlang="EN-US" datatype="html"
   creationtoolversion="6.0.1" segtype="sentence" srclang="en"/>
  <body>
    <tu>
      <tuv xml:lang="en"><seg>Press <bpt i="1" x="1">&lt;b&gt;</bpt>Generate<ept i="1">&lt;/b&gt;</ept> to
 start <ph x="2">{count}</ph> jobs.</seg></tuv>
      <tuv xml:lang="de"><seg><bpt i="1" x="1">&lt;b&gt;</bpt>Erzeugen<ept i="1">&lt;/b&gt;</ept> startet
 <ph x="2">{count}</ph> Aufträge.</seg></tuv>
      <tuv xml:lang="fr"><seg>Appuyez sur <bpt i="1">&lt;b&gt;</bpt>Générer<ept i="1">&lt;/b&gt;</ept> pour
 lancer <ph x="2">{count}</ph> tâches.</seg></tuv>
    </tu>
  </body>
</tmx>
"""


def test_a_weblate_export_reads_into_the_services_language_codes() -> None:
    parsed = read_tmx(WEBLATE.encode())
    assert parsed.tool == "Translate Toolkit"
    assert parsed.units == [
        Unit("en", "zh", "Sampling steps", "迭代步数"),
        Unit("en", "zh", "Batch count", "总批次数"),
    ]


def test_an_omegat_project_memory_reads_with_its_alternative_translations() -> None:
    parsed = read_tmx(OMEGAT.encode())
    assert parsed.tool == "OmegaT"
    assert [(u.src, u.tgt, u.source, u.target) for u in parsed.units] == [
        ("en", "zh", "Save the image", "保存图像"),
        ("en", "zh", "Upscale", "放大"),
    ]


def test_inline_codes_keep_the_markup_they_stand_for_and_every_target_is_a_pair() -> None:
    units = read_tmx(INLINE.encode()).units
    assert [u.tgt for u in units] == ["de", "fr"]
    assert units[0].source == "Press <b>Generate</b> to\n start {count} jobs."
    assert units[0].target == "<b>Erzeugen</b> startet\n {count} Aufträge."


@pytest.mark.parametrize(
    ("text", "line", "says"),
    [
        (WEBLATE.replace("</tu>\n<tu>", "</tu>\n<tu", 1), 9, "not well-formed"),
        (WEBLATE.replace(' xml:lang="zh_Hans"', "", 1), 8, "no xml:lang"),
        (WEBLATE.replace("<seg>Batch count</seg>", "", 1), 9, "has no <seg>"),
        # A start tag over two lines is placed at its last one (libxml2's line numbers).
        (WEBLATE.replace(' srclang="en"', "", 1), 5, "no srclang"),
        ("<xliff version='1.2'/>", 1, "not <tmx>"),
    ],
)
def test_a_malformed_file_is_refused_naming_its_line(text: str, line: int, says: str) -> None:
    with pytest.raises(MemoryFileInvalid) as refused:
        read_tmx(text.encode())
    assert f"TMX line {line}:" in str(refused.value) and says in str(refused.value)


def test_entities_are_not_expanded() -> None:
    bomb = WEBLATE.replace(
        '<!DOCTYPE tmx SYSTEM "tmx14.dtd">', '<!DOCTYPE tmx [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
    ).replace("迭代步数", "&x;")
    units = read_tmx(bomb.encode()).units
    assert "root:" not in units[0].target


def test_the_export_is_valid_tmx_14b_and_reads_back_the_same() -> None:
    units = [
        Unit("en", "zh", "Save & <b>go</b>", "保存并<b>开始</b>"),
        Unit("en", "de", "Steps: {n}", "Schritte: {n}"),
        Unit("ja", "en", "画像", "image"),
    ]
    data = write_tmx(units)
    dtd = etree.DTD(str(DTD))
    assert dtd.validate(etree.fromstring(data)), dtd.error_log.filter_from_errors()
    assert read_tmx(data).units == units


def test_a_file_that_breaks_the_dtd_is_caught_by_it() -> None:
    # The check above can fail: a header without its required attributes is not valid.
    dtd = etree.DTD(str(DTD))
    assert not dtd.validate(etree.fromstring(b'<tmx version="1.4"><header/><body/></tmx>'))


@pytest.mark.parametrize("fmt", ["csv", "tsv"])
def test_csv_and_tsv_pairs_round_trip_with_their_languages(fmt: str) -> None:
    units = [Unit("en", "zh", 'Say "hi", then go', "说“你好”，然后走"), Unit("en", "zh", "Tab", "制表")]
    assert read_memory_file(write_memory_file(units, fmt), fmt).units == units


def test_two_column_pairs_take_the_languages_given_and_name_a_bad_line() -> None:
    data = "Hello\t你好\n\nBye\t再见\n".encode()
    assert read_memory_file(data, "tsv", "en-US", "zh_CN").units == [
        Unit("en", "zh", "Hello", "你好"),
        Unit("en", "zh", "Bye", "再见"),
    ]
    with pytest.raises(MemoryFileInvalid, match="TSV line 1: no languages"):
        read_memory_file(data, "tsv")
    with pytest.raises(MemoryFileInvalid, match="CSV line 2: 3 columns"):
        read_memory_file(b"a,b\na,b,c\n", "csv", "en", "de")


def test_the_format_is_the_one_given_else_the_files_extension() -> None:
    assert memory_format("memory.TMX", None) == "tmx"
    assert memory_format("pairs.txt", "csv") == "csv"
    with pytest.raises(MemoryFileInvalid, match="'xlsx'"):
        memory_format("book.xlsx", None)


@pytest.mark.parametrize("name", ["WEBLATE", "OMEGAT", "INLINE"])
def test_each_tools_dialect_is_valid_tmx_14b(name: str) -> None:
    # Validated against the DTD itself, whatever DOCTYPE the tool wrote (OmegaT names TMX 1.1's).
    dtd = etree.DTD(str(DTD))
    document = etree.fromstring(globals()[name].encode())
    assert dtd.validate(document), dtd.error_log.filter_from_errors()


TOOLKIT_READ = """
import json, sys
from translate.storage.tmx import tmxfile
store = tmxfile(sys.stdin.buffer.read())
print(json.dumps([[u.source, u.target] for u in store.units]))
"""


@pytest.mark.parametrize("name", ["WEBLATE", "OMEGAT", "INLINE"])
def test_translate_toolkits_reader_reads_the_same_pairs(name: str) -> None:
    # translate-toolkit (Weblate's reader, in Weblate's venv) pairs a <tu>'s first two variants.
    python = Path(__file__).resolve().parents[2] / ".venv-weblate" / "bin" / "python"
    if not python.exists():
        pytest.skip(f"no translate-toolkit: no Weblate venv at {python} (deploy/weblate-venv.sh)")
    text = globals()[name]
    done = subprocess.run(
        [str(python), "-c", TOOLKIT_READ], input=text.encode(), capture_output=True, check=True, timeout=120
    )
    theirs = [tuple(pair) for pair in json.loads(done.stdout)]
    ours = read_tmx(text.encode()).units
    assert theirs == [(u.source, u.target) for u in ours if u.tgt == ours[0].tgt]


def test_an_empty_target_is_untranslated_unless_the_file_means_it() -> None:
    # translate-toolkit writes an untranslated unit so; OmegaT writes an "empty translation" so.
    empty = WEBLATE.replace("<seg>迭代步数</seg>", "<seg></seg>").replace(
        "<seg>总批次数</seg>", "<seg> </seg>"
    )
    assert [u.target for u in read_tmx(empty.encode()).units] == [" "]
    assert [u.target for u in read_tmx(empty.encode(), keep_blank=True).units] == ["", " "]
    assert read_memory_file(b"Hello,\nBye, \n", "csv", "en", "zh").units == [Unit("en", "zh", "Bye", " ")]
