"""Corpus-level analysis of attention: head statistics, alignments, contribution-corrected attention."""
