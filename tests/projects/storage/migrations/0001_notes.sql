-- Migration number: 0001
CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL);
