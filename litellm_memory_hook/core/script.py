"""Script (and, for Latin letters, Hinglish versus English) of the user's last message.

The final reminder of the system message names the script the reply must be written in (DESIGN.md
section 5, field cases C12 and C15): "Their last message is in Devanagari, so write your reply in
Devanagari." This module makes the guess and words that clause.

Rules of :func:`detect_script`:

* Only letters count: characters of category L (letters) or M (marks, e.g. Indic vowel signs) whose
  Unicode ``Script`` property is a real script. Characters of script Common or Inherited (digits,
  punctuation, emoji, whitespace, the Japanese long-vowel mark, Arabic harakat) are ignored.
  Letters of a script not in :data:`SCRIPTS` (e.g. Armenian, Ethiopic) count towards the total
  but not towards any script.
* Fewer than :data:`MIN_LETTERS` counted letters: no guess.
* If the text has any Hiragana or Katakana, Han, Hiragana and Katakana are pooled as "Japanese";
  otherwise Han letters count as "Han" (Chinese).
* A script wins when it has at least :data:`MAJORITY` (70 %) of the counted letters; otherwise the
  text is mixed and there is no guess.
* Latin text embedded in a sentence of another script does not count against it: when Latin wins
  or no script does, the letters are counted again without the Latin words no language lists
  (names, products, identifiers: "Python", "TypeError") and without the Latin text after a colon
  that follows a letter of another script (a pasted error or log line); a script other than
  Latin that then wins with at least :data:`FRAME_LETTERS` letters (:data:`FRAME_SYLLABLES`
  characters of kana, Han or Hangul before such a colon) is the guess.
* For Latin, the language is told from Latin words (lower-cased runs of Latin letters, with inner
  apostrophes; a right single quotation mark counts as ``'``) by marker words:
  :data:`ENGLISH_WORDS`, :data:`HINGLISH_WORDS` and, for each other language in
  :data:`OTHER_LATIN_WORDS` (German, Spanish, French, Portuguese, Italian, Dutch, Indonesian,
  Turkish, Tagalog, Polish, Scandinavian), that language's common function words. A word listed by
  several languages (``mein`` German and Hinglish, ``was`` English and German, ``se`` Spanish and
  Hinglish) counts for each of them. An unlisted word with an apostrophe counts by its elided head
  and its rest (French ``c'est`` as ``c'`` and ``est``). A word capitalised inside a sentence (an
  upper-case letter, at least one more letter before any apostrophe, the rest lower case; not the
  first word, nor a word after ``.``, ``!``, ``?``, ``:``, ``;``, a line break, an ellipsis or an
  opening bracket or quote) is taken for a name: ``Ana``, ``Luigi's``, ``Abhi`` in "the report Abhi
  sent", ``Berlin`` in "Tom lives in Berlin now."; not ``I'm`` or ``NASA``. A name is not one of the
  ``n`` words and counts for no Hinglish or lexicon count below, but still for English (``May`` in
  "Is Paris nice in May?") and the other languages that list it (German capitalises its nouns and
  the formal ``Sie``). Counts, over the message's ``n`` words other than names: ``e`` English and
  ``h`` Hinglish marker words; ``b`` words that English or Hinglish (or both) lists; ``l`` words of
  :data:`ENGLISH_LEXICON`, English words at least ten times as frequent in English as in any of 21
  other Latin-script languages (``sister``, ``plays``, ``birthday``; not ``met``, ``come``,
  ``party``, ``nice``; rule in ``bench/english_lexicon.py``), none of them a marker word; ``a``
  accented words (a letter outside ASCII: ``müde``, ``está``, ``çok``; capitalised words after the
  first word are not counted, whether or not a sentence ends before them: names such as ``Jürgen``,
  ``São Paulo``); a Hinglish marker capitalised inside a sentence is a name ("call Kal tomorrow")
  and so counts only for the other languages that list it; ``o`` the larger of ``a`` and the best
  other language's count; ``r`` the same but without the other languages' words that English lists
  and Hinglish does not (``i`` Italian, ``for`` Scandinavian, ``on`` Polish: in a code-switched line
  they are its English half). The Hinglish weight ``w`` is ``h`` plus ``HINGLISH_WEIGHT - 1`` (2)
  for each Hinglish marker not in :data:`HINGLISH_WEAK_WORDS`: a Hindi pronoun, verb, postposition,
  particle or form of address (``hai``, ``kya``, ``mera``, ``tu``, ``yaar``, ``bhai``) is all but
  absent from English text, while code-switched Hinglish is full of English words, so it takes more
  than three English markers to outweigh one; the weak ones (English words and names such as ``ho``,
  ``mat``, ``beta``, ``Jo``, the honorific ``ji``, and nouns English borrows such as ``khana``,
  ``shaadi``) weigh 1, and alone never make Hinglish ("Join the beta", "Me and Jo" are not). With
  ``h_s`` the strong ones: Hinglish when ``h_s >= 1``, ``w >= e``, ``b >= MARKER_SHARE * n`` and ``h
  > r``; otherwise, when ``h_s >= 1``, ``w >= e`` and ``b >= MARKER_SHARE * n``, unknown; otherwise
  English when ``e > w`` (or, with no Hinglish marker at all, ``h`` 0, when ``l >= 2``), ``e + l >
  o`` and ``e + l >= MARKER_SHARE * n``; otherwise unknown (``language`` ``None``): another
  language, a tie, or too few marker words. So "Mera kutta bahut cute hai, what do you think?"
  (``w`` 9, ``e`` 4), "Ok bhai, see you tomorrow" (3, 3) and "Sorry yaar, I forgot" are Hinglish; "I
  love chai", "namaste everyone" and "Thanks bhai, that was really helpful!" (3, 4) are English. And
  English or Hinglish must beat every other language's evidence: "Wie alt ist mein Hund?", "Mi perro
  se llama Toby.", "Was ist das?", "Is het goed?", "Ho fame", "Tu sei pazzo" and "Se me hizo tarde."
  are unknown, and their reminder asks for the same language (:data:`CLAUSE_LATIN_OTHER`). Unknown
  is the safe outcome: a wrong English or Hinglish label tells the model to switch language. Lexicon
  words are English evidence against the other languages and towards the share, but not against
  Hinglish (code-switched Hinglish is full of English nouns and verbs), and a lone one does not make
  English, since English words are borrowed everywhere (Indonesian "Meeting jam sembilan"). So "My
  sister Ana plays cello." (``e`` 1 ``my``, ``l`` 2; Polish 1 ``my``), "Tom lives in Berlin now."
  and "Nadia painted her kitchen yellow." (``e`` 1, ``l`` 3; Turkish 1 ``her``) are English; "Ana
  and Marco met in Lisbon." (``e`` 2 ``and`` ``in``, Dutch 2 ``met`` ``in``) and "Carlos hates
  cilantro." (``l`` 1) are unknown. Words common to English and Hinglish (``to``, ``main``, ``tab``,
  ``ok``) are in neither list; ``me`` is in both. Accuracy on ``tests/data/latin_languages.jsonl``
  (short chat messages in 15 languages, code-switched Hinglish, English with Hindi loanwords) and on
  ``tests/data/latin_names.jsonl`` (short English lines with names, places, brands and numbers;
  lines of 12 other languages and Hinglish with names) is checked by ``tests/test_script.py``.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from types import MappingProxyType
from typing import Final

import regex

from litellm_memory_hook.core.excerpt import excerpt

__all__ = [
    "CLAUSE_EARLIER",
    "CLAUSE_HINGLISH",
    "CLAUSE_KNOWN",
    "CLAUSE_LATIN_OTHER",
    "CLAUSE_UNCLEAR",
    "ENGLISH",
    "ENGLISH_LEXICON",
    "ENGLISH_WORDS",
    "FRAME_LETTERS",
    "FRAME_SYLLABLES",
    "HINGLISH",
    "HINGLISH_WEAK_WORDS",
    "HINGLISH_WEIGHT",
    "HINGLISH_WORDS",
    "MAJORITY",
    "MARKER_SHARE",
    "MIN_LETTERS",
    "OTHER_LATIN_WORDS",
    "SCRIPTS",
    "ScriptGuess",
    "conversation_script",
    "detect_script",
    "reminder_language_clause",
]

SCRIPTS: Final[tuple[str, ...]] = (
    "Latin",
    "Devanagari",
    "Bengali",
    "Gurmukhi",
    "Gujarati",
    "Tamil",
    "Telugu",
    "Kannada",
    "Malayalam",
    "Arabic",
    "Cyrillic",
    "Greek",
    "Hebrew",
    "Thai",
    "Han",
    "Japanese",
    "Hangul",
)
"""Every value :attr:`ScriptGuess.script` can take besides ``None``."""

ENGLISH: Final = "English"
"""Value of :attr:`ScriptGuess.language` for English in Latin letters."""

HINGLISH: Final = "Hinglish (romanised Hindi)"
"""Value of :attr:`ScriptGuess.language` for romanised Hindi (Hinglish) in Latin letters."""

MIN_LETTERS: Final = 2
"""Fewer counted letters than this gives no guess."""

MAJORITY: Final = 0.7
"""Share of the counted letters a script needs to win (0-1)."""

MARKER_SHARE: Final = 0.2
"""Share of the Latin words that must be marker words of English or Hinglish (0-1)."""

FRAME_LETTERS: Final = 3
"""Letters a script other than Latin needs to be the sentence that Latin terms or a pasted line
are embedded in (:func:`detect_script`): "Python это" is Cyrillic, "Python да" is not. Scripts
whose every character is a syllable or a word (kana, Han, Hangul) need
:data:`FRAME_SYLLABLES`."""

FRAME_SYLLABLES: Final = 2
""":data:`FRAME_LETTERS` for Japanese, Han and Hangul before a colon with a pasted line after it:
two characters are a word there ("エラー: TypeError ..." is Japanese; the long-vowel mark is not
counted), while "Tokyo 東京" stays Latin."""

_SYLLABIC: Final = frozenset({"Japanese", "Han", "Hangul"})


def _word_set(words: str) -> frozenset[str]:
    return frozenset(words.split())


HINGLISH_WORDS: Final[frozenset[str]] = _word_set(
    """
    hai hain hoon hun hu ho tha thi thay raha rahi rahe rha rhi rhe
    kya kyaa kyun kyu kyon kyunki kaise kaisa kaisi kab kaha kahan kaun kitna kitni kitne jab
    nahi nhi nahin nai na mat haan han ji
    mera meri mere mujhe mjhe mujhko mujhse tera teri tere tujhe tum tumhe tumhara tumhari aap
    aapka aapki apna apni apne hum hume humko hamara hamari uska uski uske unka unki unke usko
    yeh ye woh wo vo yahan wahan idhar udhar
    bhi aur lekin par magar phir fir toh sirf bas abhi kal aaj parso hamesha kabhi
    ka ki ke ko se mein mei mai mujh
    kar karo karna karke kiya kiye kiyi diya diye liya liye gaya gayi gaye gya gyi hua hui hue
    aa raho rehna rehta rehti rehte jao jana jaana aana aaya aayi aaye
    dekho dekh bolo bol batao bata
    yaar yar bhai acha accha achha achcha theek thik thoda zyada jyada bahut bohot bahot kuch sab
    koi matlab pata chalo chal samjha samjhe samajh wala wali wale
    isko usse isse unse iska iski iske inka unko inko tumne maine usne humne aapne kisi kis kuchh
    karta karti karte karenge karunga karungi karein kijiye dijiye dena dedo sakta sakti sakte
    hoga hogi honge hona hota hoti hote lagta lagti lage laga chahiye chahie chahta chahti
    naam kaam baat ghar khana yaad pasand dost saal mahina mahine hafte hafta waqt paise paisa
    bilkul sach jaldi baad pehle sahi galat agar shayad zaroor wapas andar bahar upar neeche
    pe tak ab jo ek dono beta beti behen bhaiya didi mummy shaadi raat neend me
    tu tujhse tumse humse aapko aapse unhe sabko sabse itna itni jitna aisa aise thodi kidhar
    haina baje arre arey wah waah suno ekdum mast pagal bakwas chutti pakka ruk aata aati aate
    jata jati jate jaunga jaungi jayega jayegi aaunga aaoge aayega lagega milte milenge mila
    ne bola boli bole dekha dekhi dekhna socha soch banau banaun pahuncha pahunch kardo karu
    karun
    """
)
"""Common romanised Hindi function words and very frequent Hinglish words (lower case)."""

HINGLISH_WEAK_WORDS: Final[frozenset[str]] = _word_set(
    """
    me ho mat par bas jo pe ab aa han hun hu koi jab fir hum mai beta mummy bata pata dena jana
    ji mast
    naam kaam baat ghar khana yaad pasand dost saal mahina mahine hafte hafta waqt paise paisa
    shaadi raat neend
    """
)
"""The :data:`HINGLISH_WORDS` that also occur in English text: English words, abbreviations and
names (``ho``, ``mat``, ``par``, ``bas``, ``beta``, ``Jo``) and nouns English borrows (``naam``,
``khana``, ``shaadi``, ``paisa``). Against English they weigh 1, every other Hinglish marker
:data:`HINGLISH_WEIGHT`."""

HINGLISH_WEIGHT: Final = 3
"""Weight against English of a Hinglish marker word not in :data:`HINGLISH_WEAK_WORDS`.

Hindi pronouns, verbs, postpositions, particles and forms of address (``hai``, ``kya``, ``mera``,
``yaar``, ``bhai``) almost never occur in English text, while code-switched Hinglish is full of
English words ("Mera kutta bahut cute hai, what do you think?": 3 Hinglish, 4 English markers):
English must outnumber such a marker more than three to one to win."""

ENGLISH_WORDS: Final[frozenset[str]] = _word_set(
    """
    the a an is are am was were be been being i you he she we they it my your his her our their
    its this that these those what where when why how who which whom whose do does did don't
    doesn't didn't can can't cannot could will won't would should shall must may might have has
    had having of in on at for with from by about into over under after before and or but not
    no yes if then than so because just also very really there here i'm it's you're let's
    hello hi hey thanks thank please
    me him us them mine yours myself yourself i've i'd i'll you've you'll you'd we're we've
    we'll they're they've isn't aren't wasn't weren't haven't hasn't wouldn't shouldn't
    couldn't that's what's where's who's there's how's he's she's
    some any all every each other another more most much many only even still already again too
    as up down out off away back through between during without until while since though
    ever never always often sometimes usually maybe
    get got make made go going went gone come take took give gave know knew think thought say said
    tell told see saw look want need like love feel try find work call ask help remember remind
    forget mean keep let put show write read send buy pay eat cook live lives moved start learn
    talk mentioned happened
    name time today tomorrow yesterday tonight morning night week month year day people thing
    something anything nothing everything someone everyone good great bad new old last next first
    best better sure right okay well favorite favourite sorry yeah bye
    """
)
"""Common English function words, greetings and very frequent chat words (lower case)."""

OTHER_LATIN_WORDS: Final[Mapping[str, frozenset[str]]] = MappingProxyType(
    {
        "German": _word_set(
            """
            der die das den dem des ein eine einen einem einer eines und oder aber doch ich du er
            sie es wir ihr mich mir dich dir sich uns euch ihn ihm ihnen mein meine meinen meinem
            meiner dein deine deinen deinem deiner sein seine ihre ihren unser unsere ist bin bist
            sind seid war waren wird werden wurde habe hast hat haben hatte hatten kann kannst
            können muss musst müssen will willst wollen soll sollte möchte möchtest würde nicht
            kein keine keinen nichts auch noch schon nur sehr so ja nein nach mit von zu zum zur
            bei für auf aus über unter vor im am ins vom durch ohne gegen um was wer wie wo wann
            warum wieso welche welcher welches dass wenn weil ob als denn also dann jetzt heute
            morgen gestern hier dort immer gern gerne mal bitte danke hallo gut viel mehr alles
            etwas man heißt heisst geht gibt weiß weiss mag machen mache macht
            """
        ),
        "Spanish": _word_set(
            """
            el la los las un una unos unas y o pero que de del al en con por para sin sobre entre
            hasta desde mi mis tu tus su sus nuestro nuestra yo tú él ella nosotros ellos ellas
            usted ustedes te se le les lo nos es son está están estoy estás soy eres era fue ser
            estar hay tengo tiene tienes tenemos tienen puedo puede puedes quiero quieres hacer
            hago hace dónde donde qué cómo como cuándo cuando cuánto cuántos cuántas quién quien
            cuál cual porque muy más mucho mucha muchos también ya todavía no sí si bien hoy
            mañana ayer aquí allí ahora siempre nunca algo nada todo todos esto eso este esta ese
            esa gracias hola favor llama llamo vez tan a me
            """
        ),
        "French": _word_set(
            """
            le la les un une des du de au aux et ou mais donc car je tu il elle on nous vous ils
            elles me te se lui leur moi toi mon ma mes ton ta tes son sa ses notre nos votre vos
            est es suis sont sommes êtes était été être ai as avons avez ont avait fait faire
            peux peut veux veut dois doit vais va vas ne pas plus rien jamais que qui quoi quel
            quelle quels où comment pourquoi quand combien dans en sur sous avec pour par sans
            chez ce cet cette ces ça ici là oui non très bien aussi encore déjà toujours demain
            hier merci bonjour salut aujourd'hui
            c' d' j' l' m' n' qu' s' t' jusqu' lorsqu' puisqu'
            """
        ),
        "Portuguese": _word_set(
            """
            o a os as um uma uns umas e ou mas que de do da dos das em no na nos nas num numa
            por pelo pela para pra com sem sobre eu tu você vocês voce ele ela eles elas nós me
            te se lhe meu minha meus minhas teu tua seu sua nosso nossa é são está estão estou
            era foi ser estar tem tenho temos têm tinha há posso pode quero quer fazer faz não
            nao sim muito muita mais também já ainda bem hoje amanhã ontem aqui ali agora sempre
            nunca algo nada tudo isso isto esse essa este esta onde como quando quanto quantos
            quem qual porque obrigado obrigada olá oi chama vai vou
            """
        ),
        "Italian": _word_set(
            """
            il lo la i gli le un uno una e ed o ma che di del della dei degli delle da dal dalla
            in nel nella con su sul sulla per tra fra io tu lui lei noi voi loro mi ti si ci vi
            ne mio mia miei mie tuo tua suo sua nostro è sono sei siamo era stato stata essere ho
            hai ha abbiamo avete hanno avere posso puoi può voglio vuoi fare fa non sì più molto
            anche già ancora bene oggi domani ieri qui qua adesso ora sempre mai qualcosa niente
            tutto questo questa quello quella cosa dove come quando quanto quanti quante chi
            quale perché grazie ciao chiama chiamo
            l' un' dell' nell' sull' all' dall' c' quest' po'
            """
        ),
        "Dutch": _word_set(
            """
            de het een en of maar dat die dit deze van in op aan met voor naar bij uit over om te
            tot door ik je jij u hij zij ze we wij jullie mij me mijn jouw jou zijn haar ons onze
            hun is ben bent was waren wordt worden heb hebt heeft hebben had kan kun kunt kunnen
            wil wilt willen moet moeten zal zou niet geen ook nog al wel heel erg zo ja nee wat
            wie waar wanneer waarom hoe welke er hier daar nu vandaag morgen gisteren altijd
            nooit iets niets alles dank bedankt hallo hoi graag heet gaat weet gaan
            """
        ),
        "Indonesian": _word_set(
            """
            yang dan di ke dari untuk dengan pada dalam ini itu saya aku kamu anda dia kami kita
            mereka ada adalah tidak nggak gak enggak bukan sudah belum akan bisa mau ingin harus
            sedang lagi juga saja aja sangat banget apa siapa mana kenapa mengapa bagaimana
            gimana kapan berapa kalau karena tapi atau sama ya dong sih deh nih tolong terima
            kasih makasih hari besok kemarin sekarang nama namanya rumah tahun bulan minggu baru
            tak
            """
        ),
        "Turkish": _word_set(
            """
            ve ile bir bu şu o ben sen biz siz onlar beni seni bana sana benim senin onun bizim ne
            neden nasıl nasil nerede nereye kim hangi kaç kac mı mi mu mü mısın misin musun var
            yok değil degil evet hayır hayir çok cok daha en gibi için icin ama ya da de ki şey
            sey her hiç hic bugün bugun yarın yarin dün dun şimdi simdi burada orada teşekkürler
            tesekkurler teşekkür merhaba lütfen lutfen tamam adı adi adım olarak oldu olur gün
            sonra önce
            """
        ),
        "Tagalog": _word_set(
            """
            ang ng sa mga ako ikaw ka ko mo siya kami tayo sila ito iyan yan yun na ba pa po opo
            hindi oo ano saan kailan bakit paano sino may wala gusto salamat naman lang talaga din
            rin kasi pero at kung
            """
        ),
        "Polish": _word_set(
            """
            i w z na do nie się to jest jak co czy ale że mam masz ma jestem jesteś mój moja moje
            ty on ona my wy oni mnie ci go jej dla od po przez tak już jeszcze tylko bardzo gdzie
            kiedy dlaczego kto który dziękuję proszę cześć dzisiaj jutro wczoraj
            """
        ),
        "Scandinavian": _word_set(
            """
            och og jag jeg du han hon hun vi de det den är er var har hade inte ikke en ett et
            min mitt mina din ditt sin på av för for med till til om som vad hva hvad hur
            hvordan när når vem hvem kan ska skal vill vil måste må också også tack takk tak hej
            hei idag
            """
        ),
    }
)
"""Common function words of other languages written in Latin letters, by language (lower case).

Evidence against English and Hinglish: many short Hinglish marker words are also common words
of these languages (``mein`` German, ``se`` Spanish, ``hai`` Italian, ``na`` Tagalog/Polish),
and many English ones too (``was``, ``is``, ``in``, ``die``)."""


def _packaged_words(name: str) -> frozenset[str]:
    """Words of the packaged list ``script_words/{name}``: one a line, ``#`` starts a comment."""
    text = resources.files("litellm_memory_hook.core.script_words").joinpath(name)
    lines = text.read_text(encoding="utf-8").split("\n")
    return frozenset(line.strip() for line in lines if line.strip() and not line.startswith("#"))


ENGLISH_LEXICON: Final[frozenset[str]] = _packaged_words("english.txt").difference(
    ENGLISH_WORDS, HINGLISH_WORDS, *OTHER_LATIN_WORDS.values()
)
"""English words at least ten times as frequent in English as in each of 21 other Latin-script
languages (wordfreq lists; Zipf frequency 3.5 or more, among the 15,000 most frequent English
words), less every marker word: ``sister``, ``plays``, ``birthday``, ``yellow``.

Read from the packaged ``script_words/english.txt``, which ``bench/english_lexicon.py`` makes
(the rule in full there)."""

CLAUSE_KNOWN: Final = "Their last message is in {label}, so write your reply in {label}."
"""Clause for a detected script (and for English); ``{label}`` is :attr:`ScriptGuess.label`."""

CLAUSE_HINGLISH: Final = (
    "Their last message is in {label}, so write your reply in Hinglish in Latin letters."
)
"""Clause for Hinglish; ``{label}`` is :attr:`ScriptGuess.label`."""

CLAUSE_LATIN_OTHER: Final = (
    "Their last message is in {label}, so write your reply in the same language, in {label}."
)
"""Clause for Latin letters in a language other than English or Hinglish (or an unknown one)."""

CLAUSE_UNCLEAR: Final = "Write your reply in the language the user writes in."
"""Clause when no script was detected."""

CLAUSE_EARLIER: Final = (
    "Their last message is too short to tell; before it they wrote in {label}, so write your "
    "reply in {label}."
)
"""Clause when the conversation's earlier messages decide (:func:`conversation_script`)."""

SHORT_MESSAGE_LETTERS: Final = 12
"""A message with fewer letters than this ("ok", "thanks", "lol", "👍") in Latin letters, or
with no clear script, tells little of the language the user writes in: the conversation's
earlier messages decide (:func:`conversation_script`)."""

EARLIER_MESSAGES: Final = 6
"""At most this many of the user's earlier messages are read for :func:`conversation_script`."""

_LABELS: Final[dict[str, str]] = {
    "Latin": "Latin letters",
    "Arabic": "Arabic script",
    "Han": "Chinese characters (Han)",
    "Japanese": "Japanese",
    "Hangul": "Korean (Hangul)",
}

_LANGUAGE_LABELS: Final[dict[str, str]] = {
    ENGLISH: "English",
    HINGLISH: "Hinglish (romanised Hindi, in Latin letters)",
}

# Letters that are counted: categories L and M, scripts other than Common/Inherited.
_COUNTED = r"[\p{L}\p{M}--[\p{Script=Common}\p{Script=Inherited}]]"
_GROUPS: Final[tuple[str, ...]] = (
    *(name for name in SCRIPTS if name != "Japanese"),
    "Hiragana",
    "Katakana",
)
_KNOWN_SCRIPTS = "".join(f"\\p{{Script={name}}}" for name in _GROUPS)
_LETTER_RUNS: Final = regex.compile(
    "|".join(
        [
            *(f"(?P<{name}>[{_COUNTED}&&\\p{{Script={name}}}]+)" for name in _GROUPS),
            f"(?P<Other>[{_COUNTED}--[{_KNOWN_SCRIPTS}]]+)",
        ]
    ),
    regex.V1,
)
_LATIN_WORD: Final = regex.compile(
    r"[\p{L}&&\p{Script=Latin}]+(?:['\u2019][\p{L}&&\p{Script=Latin}]+)*", regex.V1
)


_HINGLISH_STRONG: Final[frozenset[str]] = HINGLISH_WORDS - HINGLISH_WEAK_WORDS
_ASCII_RUN: Final = re.compile("[a-z]+")  # the markers are ASCII: the stdlib's engine is faster


def has_hinglish_marker(text: str) -> bool:
    """Whether a text holds a Hinglish marker that English text almost never holds: a word of
    :data:`HINGLISH_WORDS` not in :data:`HINGLISH_WEAK_WORDS` (``hai``, ``kya``, ``mera``,
    ``yaar``), any case. Recall uses it to let romanised-Hindi spelling variants meet
    (:func:`litellm_memory_hook.core.recall.sound_alike`).

    Returns:
        True for "Mera kutta bahut cute hai"; False for "Join the beta" and for text without
        Latin letters.
    """
    return not _HINGLISH_STRONG.isdisjoint(_ASCII_RUN.findall(text.casefold()))


@dataclass(frozen=True)
class ScriptGuess:
    """The script of a message and, for Latin letters, its language when it can be told.

    Attributes:
        script: One of :data:`SCRIPTS`, or ``None`` when the text is mixed, unclear or has fewer
            than :data:`MIN_LETTERS` letters.
        language: :data:`ENGLISH` or :data:`HINGLISH` for Latin text where it can be told, else
            ``None``.
    """

    script: str | None
    language: str | None = None

    @property
    def label(self) -> str:
        """The phrase the reminder uses for the script or language.

        Returns:
            E.g. ``"Devanagari"``, ``"Arabic script"``, ``"English"``, ``"Hinglish (romanised
            Hindi, in Latin letters)"``, ``"Latin letters"`` (Latin, language unknown), or ``""``
            when there is no guess.
        """
        if self.script is None:
            return ""
        if self.script == "Latin" and self.language in _LANGUAGE_LABELS:
            return _LANGUAGE_LABELS[self.language]
        return _LABELS.get(self.script, self.script)


_MARKER_WORDS: Final[Mapping[str, frozenset[str]]] = MappingProxyType(
    {ENGLISH: ENGLISH_WORDS, HINGLISH: HINGLISH_WORDS, **OTHER_LATIN_WORDS}
)
_MARKER_LANGUAGES: Final[tuple[str, ...]] = tuple(_MARKER_WORDS)
_ENGLISH_INDEX: Final = _MARKER_LANGUAGES.index(ENGLISH)
_HINGLISH_INDEX: Final = _MARKER_LANGUAGES.index(HINGLISH)
_FIELD_BITS: Final = 32
"""Width of one language's counter in a packed tally (no message has 2**32 words)."""
_FIELD_MASK: Final = (1 << _FIELD_BITS) - 1


_STRONG_INDEX: Final = len(_MARKER_LANGUAGES)
"""Index of one more counter after the languages': the Hinglish words not in
:data:`HINGLISH_WEAK_WORDS`."""
_EITHER_INDEX: Final = _STRONG_INDEX + 1
"""Index of the counter of words that English or Hinglish (or both) lists."""
_OTHER_INDICES: Final[tuple[int, ...]] = tuple(
    index
    for index in range(len(_MARKER_LANGUAGES))
    if index not in (_ENGLISH_INDEX, _HINGLISH_INDEX)
)
_RIVAL_INDICES: Final[tuple[int, ...]] = tuple(
    _EITHER_INDEX + 1 + position for position in range(len(_OTHER_INDICES))
)
"""Indices of the counters, one per other language, of its words other than those English lists
and Hinglish does not."""


_LEXICON_INDEX: Final = _RIVAL_INDICES[-1] + 1
"""Index of the counter of :data:`ENGLISH_LEXICON` words."""


def _packed_word_tallies() -> dict[str, int]:
    """Each marker word's tally: 1 in the counter field of every language listing it; 1 in the
    field :data:`_STRONG_INDEX` for a Hinglish word not in :data:`HINGLISH_WEAK_WORDS`; 1 in the
    field :data:`_EITHER_INDEX` for a word English or Hinglish lists; and, unless English lists
    it and Hinglish does not, 1 in the :data:`_RIVAL_INDICES` field of every other language
    listing it. Each :data:`ENGLISH_LEXICON` word (no marker word): 1 in the field
    :data:`_LEXICON_INDEX`.

    A message's counts are then the plain sum of its words' tallies, one counter of
    :data:`_FIELD_BITS` bits per field.
    """
    table: dict[str, int] = {}
    for index, language in enumerate(_MARKER_LANGUAGES):
        for word in _MARKER_WORDS[language]:
            table[word] = table.get(word, 0) + (1 << (_FIELD_BITS * index))
    for word in HINGLISH_WORDS - HINGLISH_WEAK_WORDS:
        table[word] += 1 << (_FIELD_BITS * _STRONG_INDEX)
    for word in ENGLISH_WORDS | HINGLISH_WORDS:
        table[word] += 1 << (_FIELD_BITS * _EITHER_INDEX)
    for index, rival in zip(_OTHER_INDICES, _RIVAL_INDICES, strict=True):
        for word in _MARKER_WORDS[_MARKER_LANGUAGES[index]] - (ENGLISH_WORDS - HINGLISH_WORDS):
            table[word] += 1 << (_FIELD_BITS * rival)
    for word in ENGLISH_LEXICON:
        table[word] = 1 << (_FIELD_BITS * _LEXICON_INDEX)
    return table


_WORD_TALLIES: Final[dict[str, int]] = _packed_word_tallies()


_NAME_MASK: Final = sum(
    _FIELD_MASK << (_FIELD_BITS * index)
    for index in (_ENGLISH_INDEX, *_OTHER_INDICES, *_RIVAL_INDICES)
)
"""The fields of a tally that a name keeps: the English and the other languages' counters, not the
Hinglish, lexicon or :data:`_EITHER_INDEX` ones."""


def _name_tally(tally: int) -> int:
    """The packed tally of a word taken for a name (rules in the module docstring), from its
    tally as a word: what it counts for English (``May``, ``Will``) and the other languages."""
    kept = tally & _NAME_MASK
    if (kept >> (_FIELD_BITS * _ENGLISH_INDEX)) & _FIELD_MASK:
        kept += 1 << (_FIELD_BITS * _EITHER_INDEX)
    return kept


#: what may end a sentence before a word (a capitalised word after it is not taken for a name),
#: besides any opening bracket or quote (general categories ``Ps`` and ``Pi``)
_SENTENCE_END_CHARS: Final = frozenset(".!?:;\n\u2026\u3002\uff01\uff1f")

#: the characters ``regex`` takes for white space (``\s``; every one is below U+3001)
_SPACE: Final = "".join(c for c in map(chr, range(0x3001)) if regex.match(r"\s", c))


def _ends_sentence(gap: str) -> bool:
    """Whether ``gap``, the text between two words, ends a sentence: its last character that is
    not white space is in :data:`_SENTENCE_END_CHARS` or opens a bracket or quote, or a line
    break follows it. Linear in ``len(gap)``."""
    body = gap.rstrip(_SPACE)
    if "\n" in gap[len(body) :]:
        return True
    if not body:
        return False
    last = body[-1]
    return last in _SENTENCE_END_CHARS or unicodedata.category(last) in ("Ps", "Pi")


def _names_inside_sentences(text: str) -> set[int]:
    """Positions (in :data:`_LATIN_WORD` order) of the words taken for names: capitalised
    words (an upper-case letter, at least one more letter before any apostrophe, the rest lower
    case: ``Ana``, ``Luigi's``, not ``I'm`` or ``NASA``) that do not start the text or a
    sentence. Linear in ``len(text)``: each word looks only at the gap since the word before
    it."""
    out = set()
    previous_end = 0
    for position, match in enumerate(_LATIN_WORD.finditer(text)):
        word = match.group()
        if (
            position
            and len(word.partition("'")[0]) > 1
            and word[0].isupper()
            and word[1:].islower()
            and not _ends_sentence(text[previous_end : match.start()])
        ):
            out.add(position)
        previous_end = match.end()
    return out


def _word_tally(word: str) -> int:
    """Packed tally of a lower-cased word; for an unlisted word with an apostrophe (French
    ``c'est``, Italian ``sull'autunno``) that of its elided head (``c'``) plus its rest
    (``est``)."""
    tally = _WORD_TALLIES.get(word, 0)
    if tally or "'" not in word:
        return tally
    head, _, rest = word.partition("'")
    return _WORD_TALLIES.get(head + "'", 0) + _WORD_TALLIES.get(rest, 0)


_OTHER_SHIFTS: Final[tuple[int, ...]] = tuple(_FIELD_BITS * index for index in _OTHER_INDICES)
_RIVAL_SHIFTS: Final[tuple[int, ...]] = tuple(_FIELD_BITS * index for index in _RIVAL_INDICES)


def _accented_words(words: list[str]) -> int:
    """Words with a letter outside ASCII (``müde``, ``está``, ``çok``), except capitalised ones
    after the first word (names such as ``Jürgen``, ``São Paulo``)."""
    return sum(
        not word.isascii() and (position == 0 or not word[0].isupper())
        for position, word in enumerate(words)
    )


def _latin_language(text: str) -> str | None:
    """:data:`ENGLISH`, :data:`HINGLISH` or ``None`` for Latin text (rules in the module
    docstring)."""
    text = text.replace("\u2019", "'")
    accented = 0
    words: list[str]
    if text.isascii():
        words = _LATIN_WORD.findall(text.lower())
    else:
        # Lower-cased word by word: lower-casing the text first splits a word at a letter
        # whose lower case gains a combining mark (Turkish "İ" becomes "i" + U+0307).
        as_written: list[str] = _LATIN_WORD.findall(text)
        words = [word.lower() for word in as_written]
        accented = _accented_words(as_written)
    if not words:
        return None
    total = sum(map(_word_tally, words))
    names = _names_inside_sentences(text) if any(c.isupper() for c in text[1:]) else set()
    for position in names:
        tally = _word_tally(words[position])
        total += _name_tally(tally) - tally
    lexicon = (total >> (_FIELD_BITS * _LEXICON_INDEX)) & _FIELD_MASK
    english = (total >> (_FIELD_BITS * _ENGLISH_INDEX)) & _FIELD_MASK
    hindi = (total >> (_FIELD_BITS * _HINGLISH_INDEX)) & _FIELD_MASK
    strong = (total >> (_FIELD_BITS * _STRONG_INDEX)) & _FIELD_MASK
    hindi_weight = hindi + (HINGLISH_WEIGHT - 1) * strong
    needed = MARKER_SHARE * (len(words) - len(names))
    either = (total >> (_FIELD_BITS * _EITHER_INDEX)) & _FIELD_MASK
    if strong >= 1 and hindi_weight >= english and either >= needed:
        # Another language's words that English also lists (``i``, ``for``, ``on``) are the
        # English half of a code-switched line, not evidence against Hinglish.
        rival = max(accented, *((total >> shift) & _FIELD_MASK for shift in _RIVAL_SHIFTS))
        return HINGLISH if hindi > rival else None
    other = max(accented, *((total >> shift) & _FIELD_MASK for shift in _OTHER_SHIFTS))
    evidence = english + lexicon
    if (
        (english > hindi_weight or (hindi == 0 and lexicon >= 2))
        and evidence > other
        and evidence >= needed
    ):
        return ENGLISH
    return None


def _letter_counts_by_runs(text: str) -> dict[str, int]:
    """Counted letters per script group (:data:`_LETTER_RUNS`)."""
    counts: dict[str, int] = {}
    for match in _LETTER_RUNS.finditer(text):
        group = str(match.lastgroup)
        counts[group] = counts.get(group, 0) + len(match.group())
    return counts


def _letter_counts(text: str) -> dict[str, int]:
    """:func:`_letter_counts_by_runs`, with a fast path for ASCII text (most messages): there
    every letter is a Latin one, so the script regex (~40x slower) is not needed."""
    if not text.isascii():
        return _letter_counts_by_runs(text)
    latin = sum(1 for char in text if char.isalpha())
    return {"Latin": latin} if latin else {}


#: what is no word of the language the user writes in, each found only in a text holding its
#: mark: fenced and inline code (`` ` ``), web addresses (``://``, ``www.``) and e-mail addresses
#: (``@``). A question in Japanese about a line of Python, or in Russian with an e-mail address
#: in it, was taken for English or "Latin letters".
_NOT_PROSE: Final[tuple[tuple[tuple[str, ...], regex.Pattern[str]], ...]] = (
    (("`",), regex.compile(r"```.*?(?:```|\Z)|`[^`\n]+`", regex.DOTALL)),
    (("://", "www."), regex.compile(r"\b(?:https?|ftp)://\S+|\bwww\.\S+")),
    (("@",), regex.compile(r"(?<![\w.+-])[\w.+-]+@[\w-]+(?:\.[\w-]+)+")),
)


def _prose(text: str) -> str:
    """``text`` with its code, web and e-mail addresses (:data:`_NOT_PROSE`) each replaced by
    a space; the text itself when it holds none of their marks."""
    for marks, pattern in _NOT_PROSE:
        if any(mark in text for mark in marks):
            text = pattern.sub(" ", text)
    return text


def _latin_term(word: str) -> bool:
    """Whether a Latin word, as written, is no word of a language :func:`detect_script` knows:
    neither a marker word of English, Hinglish or another Latin-script language
    (:data:`ENGLISH_WORDS`, :data:`HINGLISH_WORDS`, :data:`OTHER_LATIN_WORDS`) nor, in lower
    case, an :data:`ENGLISH_LEXICON` word. Names, product names and identifiers ("Python",
    "Django", "TypeError", "React", "redis") are such terms; "hello", "how", "properties" are
    not."""
    tally = _word_tally(word.lower().replace("\u2019", "'"))
    if tally & ~(_FIELD_MASK << (_FIELD_BITS * _LEXICON_INDEX)):
        return False
    return not (tally and word.islower())


_NOT_LATIN_LETTER: Final = regex.compile(f"[{_COUNTED}--\\p{{Script=Latin}}]", regex.V1)


def _pasted_from(text: str) -> int:
    """Where the Latin text pasted after a sentence in another script starts: just after the
    first colon (``:`` or ``：``) that follows a letter of a script other than Latin ("このエラー
    は何ですか: TypeError: Cannot read properties..."); ``len(text)`` without one."""
    letter = _NOT_LATIN_LETTER.search(text)
    if letter is None:
        return len(text)
    colons = (text.find(":", letter.end()), text.find("\uff1a", letter.end()))
    return min((at + 1 for at in colons if at >= 0), default=len(text))


def _without_embedded_latin(text: str, pasted_from: int) -> str:
    """``text`` without the Latin words embedded in a sentence of another script
    (:func:`detect_script`): terms (:func:`_latin_term`) and every Latin word from
    ``pasted_from`` on (:func:`_pasted_from`: after a colon that follows a letter of another
    script)."""
    return _LATIN_WORD.sub(
        lambda word: " " if word.start() >= pasted_from or _latin_term(word[0]) else word[0],
        text,
    )


def _winner(counts: dict[str, int]) -> tuple[str | None, int]:
    """The script of letter counts (:func:`_letter_counts`) by the rules of the module
    docstring, with its letter count; ``(None, 0)`` when unclear."""
    total = sum(counts.values())
    if total < MIN_LETTERS:
        return None, 0
    counts = dict(counts)
    kana = counts.pop("Hiragana", 0) + counts.pop("Katakana", 0)
    if kana:
        counts["Japanese"] = kana + counts.pop("Han", 0)
    counts.pop("Other", None)
    if not counts:
        return None, 0
    script, count = max(counts.items(), key=lambda item: item[1])
    if count < MAJORITY * total:
        return None, 0
    return script, count


def detect_script(text: str) -> ScriptGuess:
    """Guess the script of a message (and Hinglish or English for Latin letters).

    The rules are in the module docstring: letters only, at least :data:`MIN_LETTERS` of them,
    kana pools Han into "Japanese", a :data:`MAJORITY` share wins.

    Code (fenced or in backticks), web addresses and e-mail addresses are left out first:
    they are written in Latin letters whatever the language around them.

    A sentence in another script with Latin text embedded in it is in that script: when the
    letters are not in another script already, they are counted again without the Latin terms
    (names, product names, identifiers: :func:`_latin_term`) and without the Latin text after a
    colon that follows a letter of another script (a pasted error or log line); if a script
    other than Latin then wins, with at least :data:`FRAME_LETTERS` letters, it is the guess.
    So "Я использую Python и Django" is Cyrillic and "このエラーは何ですか: TypeError: Cannot
    read properties of undefined" Japanese, while "Привет hello" and "hello नमस्ते दोस्त how
    are" (Latin words of a language) stay unclear.

    Args:
        text: The user's message, any length; may hold emoji, digits, markup.

    Returns:
        A :class:`ScriptGuess`; ``ScriptGuess(None)`` when unclear.

    Raises:
        Nothing; every ``str`` is accepted. Of a text over
        :data:`~litellm_memory_hook.core.excerpt.ANALYSED_CHARS`, only its
        :func:`~litellm_memory_hook.core.excerpt.excerpt` (its start and end) is read.
    """
    text = _prose(excerpt(text))
    counts = _letter_counts(text)
    script, _ = _winner(counts)
    if script in (None, "Latin") and "Latin" in counts and len(counts) > 1:
        pasted_from = _pasted_from(text)
        framed, count = _winner(_letter_counts(_without_embedded_latin(text, pasted_from)))
        labelled = framed in _SYLLABIC and pasted_from < len(text)
        least = FRAME_SYLLABLES if labelled else FRAME_LETTERS
        if framed not in (None, "Latin") and count >= least:
            return ScriptGuess(framed)
    if script is None:
        return ScriptGuess(None)
    if script == "Latin":
        return ScriptGuess(script, _latin_language(text))
    return ScriptGuess(script)


def conversation_script(last: str, earlier: Iterable[str] = ()) -> tuple[ScriptGuess, bool]:
    """The script (and language) the reply should be in: that of the user's last message,
    unless the last message tells too little and the conversation says more.

    * A short message (fewer than :data:`SHORT_MESSAGE_LETTERS` letters) in Latin letters, or
      one with no clear script ("ok", "thanks", "lol", "👍" after messages in Russian or
      Devanagari): the newest earlier message with a clear script decides when it is written
      in another script, or when the short message's own language is unknown ("ok" after
      English or Hinglish). A short message in another script than Latin ("да", "हाँ") stands:
      it was typed on purpose.
    * A message in Chinese characters only ("了解", "東京駅") after a message in Japanese is
      Japanese: kanji alone do not tell Japanese from Chinese.

    An earlier message that itself tells too little is read the same way, from the messages
    before it (within the newest :data:`EARLIER_MESSAGES`): after a message in Russian, "ok" and
    "ok" again are both Cyrillic, and after one in Japanese, "了解" twice is Japanese.

    Args:
        last: the user's last message.
        earlier: the user's messages before it, newest first (at most
            :data:`EARLIER_MESSAGES` are read, and only when ``last`` tells too little).

    Returns:
        ``(guess, from_earlier)``: the guess, and whether the earlier messages gave it.
    """
    guess = detect_script(last)
    if not _tells_little(last, guess):
        return guess, False
    return _with_earlier(guess, _earlier_script(earlier))


def _tells_little(text: str, guess: ScriptGuess) -> bool:
    """Whether ``guess``, :func:`detect_script` of ``text``, may give way to the script of the
    messages before it: Chinese characters only, or a short message in Latin letters or with
    no clear script (:func:`conversation_script`)."""
    if guess.script == "Han":
        return True
    return guess.script in (None, "Latin") and _letters(text) < SHORT_MESSAGE_LETTERS


def _with_earlier(guess: ScriptGuess, prior: ScriptGuess) -> tuple[ScriptGuess, bool]:
    """:func:`conversation_script` for a message that tells little: its own ``guess``, or
    ``prior``, the script of the messages before it (``ScriptGuess(None)`` when they have
    none)."""
    if guess.script == "Han":
        return (prior, True) if prior.script == "Japanese" else (guess, False)
    if prior.script is None:
        return guess, False
    if prior.script != "Latin" or guess.script is None or guess.language is None:
        return (prior, True) if prior != guess else (guess, False)
    return guess, False


def _earlier_script(earlier: Iterable[str]) -> ScriptGuess:
    """The script of the newest of the ``earlier`` messages (newest first, at most
    :data:`EARLIER_MESSAGES`) that has one, each message that tells little read as
    :func:`conversation_script` reads the last one, from the messages before it."""
    telling_little: list[ScriptGuess] = []
    prior = ScriptGuess(None)
    for number, text in enumerate(earlier):
        if number >= EARLIER_MESSAGES:
            break
        guess = detect_script(text)
        if _tells_little(text, guess):
            telling_little.append(guess)
        elif guess.script is not None:
            prior = guess
            break
    for guess in reversed(telling_little):
        resolved, _ = _with_earlier(guess, prior)
        if resolved.script is not None:
            prior = resolved
    return prior


def _letters(text: str) -> int:
    return sum(_letter_counts(_prose(excerpt(text))).values())


def reminder_language_clause(
    guess: ScriptGuess,
    *,
    known: str = CLAUSE_KNOWN,
    hinglish: str = CLAUSE_HINGLISH,
    latin_other: str = CLAUSE_LATIN_OTHER,
    unclear: str = CLAUSE_UNCLEAR,
    from_earlier: bool = False,
    earlier: str = CLAUSE_EARLIER,
) -> str:
    """Word the reminder's sentence about the reply's language and script.

    Args:
        guess: What :func:`detect_script` returned for the user's last message.
        known: Template for a detected script or English; ``{label}`` is replaced.
        hinglish: Template for Hinglish; ``{label}`` is replaced.
        latin_other: Template for Latin letters in another or unknown language.
        unclear: Sentence when there is no guess (used as is).
        from_earlier: the guess came from the conversation's earlier messages
            (:func:`conversation_script`).
        earlier: Template for such a guess; ``{label}`` is replaced.

    Returns:
        One sentence, e.g. "Their last message is in Devanagari, so write your reply in
        Devanagari."

    Raises:
        KeyError, IndexError or ValueError: a template has a placeholder other than ``{label}``
            or unbalanced braces.
    """
    label = guess.label
    if not label:
        return unclear
    if from_earlier:
        return earlier.format(label=label)
    if guess.script == "Latin":
        if guess.language == HINGLISH:
            return hinglish.format(label=label)
        if guess.language is None:
            return latin_other.format(label=label)
    return known.format(label=label)
