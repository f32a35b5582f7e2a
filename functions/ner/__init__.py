"""Named entities, noun chunks and part-of-speech tags with spaCy en_core_web_sm."""
