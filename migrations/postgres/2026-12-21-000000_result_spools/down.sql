DROP TABLE result_spools;
