"""WordNet 3.0 synonyms, read straight from the database files Debian's `wordnet-base` installs
under /usr/share/wordnet (index.<pos>, data.<pos>, <pos>.exc; format: wndb(5WN)).

Not NLTK's reader: it also needs `lexnames`, which wordnet-base does not ship, and NLTK would
otherwise want to download its own copy. What the recipes need is small: the synonyms of a word
per part of speech, found as WordNet's `morphy` finds a word's base forms (the exception lists,
then the detachment rules), so "movies" finds the synsets of "movie".
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from ptmlab.contracts import ConfigError

WORDNET_DIR = Path("/usr/share/wordnet")
POS_FILES = {"n": "noun", "v": "verb", "a": "adj", "r": "adv"}
# WordNet's morphy detachment rules (suffix -> replacement), per part of speech
DETACHMENTS = {
    "n": [
        ("s", ""),
        ("ses", "s"),
        ("ves", "f"),
        ("xes", "x"),
        ("zes", "z"),
        ("ches", "ch"),
        ("shes", "sh"),
        ("men", "man"),
        ("ies", "y"),
    ],
    "v": [("s", ""), ("ies", "y"), ("es", "e"), ("es", ""), ("ed", "e"), ("ed", ""), ("ing", "e"), ("ing", "")],
    "a": [("er", ""), ("est", ""), ("er", "e"), ("est", "e")],
    "r": [],
}


class WordNet:
    def __init__(self, folder: Path = WORDNET_DIR):
        folder = Path(folder)
        if not (folder / "index.noun").is_file():
            raise ConfigError(
                f"WordNet 3.0 not found in {folder} (install it: apt-get install -y wordnet-base; "
                f"scripts/install_system_deps.sh does)"
            )
        self.folder = folder
        self.index = {pos: self._read_index(folder / f"index.{name}") for pos, name in POS_FILES.items()}
        self.exceptions = {pos: self._read_exceptions(folder / f"{name}.exc") for pos, name in POS_FILES.items()}
        self._data = {pos: (folder / f"data.{name}").open("rb") for pos, name in POS_FILES.items()}

    @staticmethod
    def _read_index(path: Path) -> dict[str, list[int]]:
        """lemma -> its synset offsets (index line: lemma pos synset_cnt p_cnt ptr×p_cnt sense_cnt tagsense_cnt offsets)."""
        out = {}
        with path.open(encoding="utf-8") as f:
            for line in f:
                if line.startswith(" "):  # the licence header
                    continue
                parts = line.split()
                synsets, pointers = int(parts[2]), int(parts[3])
                out[parts[0]] = [int(x) for x in parts[6 + pointers : 6 + pointers + synsets]]
        return out

    @staticmethod
    def _read_exceptions(path: Path) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        with path.open(encoding="utf-8") as f:
            for line in f:
                inflected, *bases = line.split()
                out.setdefault(inflected, []).extend(bases)
        return out

    def base_forms(self, word: str, pos: str) -> list[str]:
        """morphy: the forms of `word` that WordNet lists under `pos` (the word itself first)."""
        word = word.lower()
        forms = [word] + self.exceptions[pos].get(word, [])
        forms += [word[: -len(suffix)] + repl for suffix, repl in DETACHMENTS[pos] if word.endswith(suffix)]
        return [f for f in dict.fromkeys(forms) if f in self.index[pos]]

    def synset_words(self, pos: str, offset: int) -> list[str]:
        """The words of one synset (data line: offset lex_filenum ss_type w_cnt(hex) word lex_id ...)."""
        f = self._data[pos]
        f.seek(offset)
        parts = f.readline().decode("utf-8").split()
        count = int(parts[3], 16)
        # an adjective may carry a syntactic marker: "galore(ip)"
        return [parts[4 + 2 * k].split("(")[0] for k in range(count)]

    def parts_of_speech(self, word: str) -> set[str]:
        return {pos for pos in POS_FILES if self.base_forms(word, pos)}

    def synonyms(self, word: str, pos: str | None = None) -> list[str]:
        """Single-word synonyms of `word` over its synsets (of `pos`, or all), in WordNet's sense
        order, the word and its base forms left out, lower-case as WordNet writes them."""
        out = []
        for p in [pos] if pos else POS_FILES:
            forms = self.base_forms(word, p)
            for form in forms:
                for offset in self.index[p][form]:
                    out += [
                        w
                        for w in self.synset_words(p, offset)
                        if "_" not in w and w.lower() not in forms and w.lower() != word.lower()
                    ]
        return list(dict.fromkeys(out))


@lru_cache(maxsize=1)
def load_wordnet() -> WordNet:
    """One WordNet per process (reading the index files takes about a second)."""
    return WordNet()
