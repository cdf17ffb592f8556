"""The paper-table studies: FHAUC vs DPAUC, RevFRF effectiveness, the gray-box audit."""
