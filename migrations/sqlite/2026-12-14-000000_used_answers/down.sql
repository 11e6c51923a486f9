DROP TABLE used_answers;
