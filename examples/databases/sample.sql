-- A small lending library. Made up by the agentenv project for its examples and tests.
PRAGMA foreign_keys = ON;

CREATE TABLE authors (
    id      INTEGER PRIMARY KEY,
    name    TEXT NOT NULL,
    country TEXT,
    born    INTEGER CHECK (born BETWEEN 1000 AND 2100)
);

CREATE TABLE books (
    id        INTEGER PRIMARY KEY,
    isbn      TEXT NOT NULL UNIQUE,
    title     TEXT NOT NULL CHECK (length(title) > 0),
    author_id INTEGER NOT NULL REFERENCES authors (id),
    published INTEGER,
    genre     TEXT NOT NULL CHECK (genre IN ('fiction', 'poetry', 'history', 'science', 'children')),
    copies    INTEGER NOT NULL DEFAULT 1 CHECK (copies >= 0)
);

-- Free-form labels on books; the key is the pair (book_id, tag).
CREATE TABLE book_tags (
    book_id INTEGER NOT NULL REFERENCES books (id) ON DELETE CASCADE,
    tag     TEXT NOT NULL,
    PRIMARY KEY (book_id, tag)
);

CREATE TABLE members (
    id          INTEGER PRIMARY KEY,
    name        TEXT NOT NULL,
    email       TEXT NOT NULL UNIQUE,
    joined      DATE NOT NULL,
    active      BOOLEAN NOT NULL DEFAULT 1,
    referred_by INTEGER REFERENCES members (id) ON DELETE SET NULL
);

CREATE TABLE loans (
    id          INTEGER PRIMARY KEY,
    book_id     INTEGER NOT NULL REFERENCES books (id),
    member_id   INTEGER NOT NULL REFERENCES members (id),
    loaned_on   DATE NOT NULL,
    due_on      DATE NOT NULL,
    returned_on DATE,
    status      TEXT NOT NULL DEFAULT 'open'
                CHECK (status IN ('open', 'overdue', 'returned', 'lost')),
    created_at  TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP
);

-- How a loan's status may change; a row with no from_status is a status a new loan may have.
CREATE TABLE loans_status_transitions (
    from_status TEXT,
    to_status   TEXT NOT NULL
);

BEGIN TRANSACTION;

INSERT INTO authors VALUES (1, 'Maren Holt', 'Norway', 1948);
INSERT INTO authors VALUES (2, 'Tomasz Wierzba', 'Poland', 1962);
INSERT INTO authors VALUES (3, 'Adaeze Nwosu', 'Nigeria', 1979);
INSERT INTO authors VALUES (4, 'Luis Carrega', 'Portugal', 1935);
INSERT INTO authors VALUES (5, 'Hana Kobayashi', 'Japan', 1984);
INSERT INTO authors VALUES (6, 'Peter Ellory', 'United Kingdom', 1921);
INSERT INTO authors VALUES (7, 'Sofia Brandt', 'Germany', 1990);
INSERT INTO authors VALUES (8, 'Ines Valcourt', 'France', 1957);
INSERT INTO authors VALUES (9, 'Rafael Montoya', 'Mexico', 1969);
INSERT INTO authors VALUES (10, 'Elin Sund', 'Sweden', 2001);
INSERT INTO authors VALUES (11, 'Oskar Lind', NULL, NULL);
INSERT INTO authors VALUES (12, 'June Achterberg', 'Netherlands', 1973);

INSERT INTO books VALUES (1, '978-0-01037-1', 'Paper Stars', 8, 1967, 'poetry', 2);
INSERT INTO books VALUES (2, '978-0-01074-2', 'Hidden Winter', 3, 1984, 'history', 3);
INSERT INTO books VALUES (3, '978-0-01111-3', 'Iron Gardens', 10, 2001, 'science', 1);
INSERT INTO books VALUES (4, '978-0-01148-4', 'Salt Lanterns', 5, 2018, 'children', 2);
INSERT INTO books VALUES (5, '978-0-01185-5', 'Late Orchard', 12, 1960, 'fiction', 3);
INSERT INTO books VALUES (6, '978-0-01222-6', 'Long Maps', 7, 1977, 'poetry', 1);
INSERT INTO books VALUES (7, '978-0-01259-7', 'Northern Rivers', 2, 1994, 'history', 2);
INSERT INTO books VALUES (8, '978-0-01296-8', 'Glass Harbour', 9, 2011, 'science', 3);
INSERT INTO books VALUES (9, '978-0-01333-9', 'Small Stars', 4, 1953, 'children', 1);
INSERT INTO books VALUES (10, '978-0-01370-0', 'Quiet Winter', 11, 1970, 'fiction', 2);
INSERT INTO books VALUES (11, '978-0-01407-1', 'Paper Gardens', 6, NULL, 'poetry', 3);
INSERT INTO books VALUES (12, '978-0-01444-2', 'Hidden Lanterns', 1, 2004, 'history', 1);
INSERT INTO books VALUES (13, '978-0-01481-3', 'Iron Orchard', 8, 2021, 'science', 0);
INSERT INTO books VALUES (14, '978-0-01518-4', 'Salt Maps', 3, 1963, 'children', 3);
INSERT INTO books VALUES (15, '978-0-01555-5', 'Late Rivers', 10, 1980, 'fiction', 1);
INSERT INTO books VALUES (16, '978-0-01592-6', 'Long Harbour', 5, 1997, 'poetry', 2);
INSERT INTO books VALUES (17, '978-0-01629-7', 'Northern Stars', 12, 2014, 'history', 3);
INSERT INTO books VALUES (18, '978-0-01666-8', 'Glass Winter', 7, 1956, 'science', 1);
INSERT INTO books VALUES (19, '978-0-01703-9', 'Small Gardens', 2, 1973, 'children', 2);
INSERT INTO books VALUES (20, '978-0-01740-0', 'Quiet Lanterns', 9, 1990, 'fiction', 3);
INSERT INTO books VALUES (21, '978-0-01777-1', 'The Paper Orchard', 4, 2007, 'poetry', 1);
INSERT INTO books VALUES (22, '978-0-01814-2', 'The Hidden Maps', 11, NULL, 'history', 2);
INSERT INTO books VALUES (23, '978-0-01851-3', 'The Iron Rivers', 6, 1966, 'science', 3);
INSERT INTO books VALUES (24, '978-0-01888-4', 'The Salt Harbour', 1, 1983, 'children', 1);
INSERT INTO books VALUES (25, '978-0-01925-5', 'The Late Stars', 8, 2000, 'fiction', 2);
INSERT INTO books VALUES (26, '978-0-01962-6', 'The Long Winter', 3, 2017, 'poetry', 0);
INSERT INTO books VALUES (27, '978-0-01999-7', 'The Northern Gardens', 10, 1959, 'history', 1);
INSERT INTO books VALUES (28, '978-0-02036-8', 'The Glass Lanterns', 5, 1976, 'science', 2);
INSERT INTO books VALUES (29, '978-0-02073-9', 'The Small Orchard', 12, 1993, 'children', 3);
INSERT INTO books VALUES (30, '978-0-02110-0', 'The Quiet Maps', 7, 2010, 'fiction', 1);

INSERT INTO book_tags VALUES (1, 'award');
INSERT INTO book_tags VALUES (2, 'series');
INSERT INTO book_tags VALUES (3, 'award');
INSERT INTO book_tags VALUES (3, 'illustrated');
INSERT INTO book_tags VALUES (4, 'translated');
INSERT INTO book_tags VALUES (5, 'local');
INSERT INTO book_tags VALUES (6, 'classic');
INSERT INTO book_tags VALUES (6, 'series');
INSERT INTO book_tags VALUES (7, 'award');
INSERT INTO book_tags VALUES (8, 'series');
INSERT INTO book_tags VALUES (9, 'illustrated');
INSERT INTO book_tags VALUES (10, 'translated');
INSERT INTO book_tags VALUES (11, 'local');
INSERT INTO book_tags VALUES (12, 'classic');
INSERT INTO book_tags VALUES (12, 'translated');
INSERT INTO book_tags VALUES (13, 'award');
INSERT INTO book_tags VALUES (14, 'series');
INSERT INTO book_tags VALUES (15, 'illustrated');
INSERT INTO book_tags VALUES (15, 'local');
INSERT INTO book_tags VALUES (16, 'translated');
INSERT INTO book_tags VALUES (17, 'local');
INSERT INTO book_tags VALUES (18, 'classic');
INSERT INTO book_tags VALUES (19, 'award');
INSERT INTO book_tags VALUES (20, 'series');
INSERT INTO book_tags VALUES (21, 'award');
INSERT INTO book_tags VALUES (21, 'illustrated');
INSERT INTO book_tags VALUES (22, 'translated');
INSERT INTO book_tags VALUES (23, 'local');
INSERT INTO book_tags VALUES (24, 'classic');
INSERT INTO book_tags VALUES (24, 'series');
INSERT INTO book_tags VALUES (25, 'award');
INSERT INTO book_tags VALUES (26, 'series');
INSERT INTO book_tags VALUES (27, 'illustrated');
INSERT INTO book_tags VALUES (28, 'translated');
INSERT INTO book_tags VALUES (29, 'local');
INSERT INTO book_tags VALUES (30, 'classic');
INSERT INTO book_tags VALUES (30, 'translated');

INSERT INTO members VALUES (1, 'Bram Quist', 'bram.quist1@example.org', '2019-04-14', 1, NULL);
INSERT INTO members VALUES (2, 'Cleo Tellier', 'cleo.tellier2@example.org', '2019-07-20', 1, NULL);
INSERT INTO members VALUES (3, 'Dev Okoro', 'dev.okoro3@example.org', '2019-10-25', 1, NULL);
INSERT INTO members VALUES (4, 'Esme Rahman', 'esme.rahman4@example.org', '2020-01-30', 1, NULL);
INSERT INTO members VALUES (5, 'Farid Umarov', 'farid.umarov5@example.org', '2020-05-06', 1, 2);
INSERT INTO members VALUES (6, 'Gia Pereira', 'gia.pereira6@example.org', '2020-08-11', 1, 1);
INSERT INTO members VALUES (7, 'Hugo Sato', 'hugo.sato7@example.org', '2020-11-16', 1, 6);
INSERT INTO members VALUES (8, 'Iris Marsh', 'iris.marsh8@example.org', '2021-02-21', 1, NULL);
INSERT INTO members VALUES (9, 'Jonah Quist', 'jonah.quist9@example.org', '2021-05-29', 0, 6);
INSERT INTO members VALUES (10, 'Ada Tellier', 'ada.tellier10@example.org', '2021-09-03', 1, 6);
INSERT INTO members VALUES (11, 'Bram Okoro', 'bram.okoro11@example.org', '2021-12-09', 1, 6);
INSERT INTO members VALUES (12, 'Cleo Rahman', 'cleo.rahman12@example.org', '2022-03-16', 1, NULL);
INSERT INTO members VALUES (13, 'Dev Umarov', 'dev.umarov13@example.org', '2022-06-21', 1, 6);
INSERT INTO members VALUES (14, 'Esme Pereira', 'esme.pereira14@example.org', '2022-09-26', 1, 6);
INSERT INTO members VALUES (15, 'Farid Sato', 'farid.sato15@example.org', '2023-01-01', 1, 6);
INSERT INTO members VALUES (16, 'Gia Marsh', 'gia.marsh16@example.org', '2023-04-08', 1, NULL);
INSERT INTO members VALUES (17, 'Hugo Quist', 'hugo.quist17@example.org', '2023-07-14', 1, 6);
INSERT INTO members VALUES (18, 'Iris Tellier', 'iris.tellier18@example.org', '2023-10-19', 0, 6);
INSERT INTO members VALUES (19, 'Jonah Okoro', 'jonah.okoro19@example.org', '2024-01-24', 1, 6);
INSERT INTO members VALUES (20, 'Ada Rahman', 'ada.rahman20@example.org', '2024-04-30', 1, NULL);

INSERT INTO loans VALUES (1, 8, 12, '2026-01-18', '2026-02-08', '2026-01-22', 'returned', '2026-01-18 10:07:00');
INSERT INTO loans VALUES (2, 15, 3, '2026-01-31', '2026-02-21', NULL, 'overdue', '2026-01-31 11:14:00');
INSERT INTO loans VALUES (3, 22, 14, '2026-02-13', '2026-03-06', NULL, 'open', '2026-02-13 12:21:00');
INSERT INTO loans VALUES (4, 29, 5, '2026-02-26', '2026-03-19', NULL, 'open', '2026-02-26 13:28:00');
INSERT INTO loans VALUES (5, 6, 16, '2026-01-14', '2026-02-04', '2026-01-22', 'returned', '2026-01-14 14:35:00');
INSERT INTO loans VALUES (6, 13, 7, '2026-01-27', '2026-02-17', NULL, 'overdue', '2026-01-27 15:42:00');
INSERT INTO loans VALUES (7, 20, 18, '2026-02-09', '2026-03-02', NULL, 'open', '2026-02-09 16:49:00');
INSERT INTO loans VALUES (8, 27, 9, '2026-02-22', '2026-03-15', NULL, 'open', '2026-02-22 09:56:00');
INSERT INTO loans VALUES (9, 4, 20, '2026-01-10', '2026-01-31', NULL, 'lost', '2026-01-10 10:03:00');
INSERT INTO loans VALUES (10, 11, 11, '2026-01-23', '2026-02-13', '2026-02-05', 'returned', '2026-01-23 11:10:00');
INSERT INTO loans VALUES (11, 18, 2, '2026-02-05', '2026-02-26', NULL, 'overdue', '2026-02-05 12:17:00');
INSERT INTO loans VALUES (12, 25, 13, '2026-02-18', '2026-03-11', NULL, 'open', '2026-02-18 13:24:00');
INSERT INTO loans VALUES (13, 2, 4, '2026-01-06', '2026-01-27', '2026-01-22', 'returned', '2026-01-06 14:31:00');
INSERT INTO loans VALUES (14, 9, 15, '2026-01-19', '2026-02-09', '2026-02-05', 'returned', '2026-01-19 15:38:00');
INSERT INTO loans VALUES (15, 16, 6, '2026-02-01', '2026-02-22', NULL, 'overdue', '2026-02-01 16:45:00');
INSERT INTO loans VALUES (16, 23, 17, '2026-02-14', '2026-03-07', NULL, 'open', '2026-02-14 09:52:00');
INSERT INTO loans VALUES (17, 30, 8, '2026-02-27', '2026-03-20', NULL, 'open', '2026-02-27 10:59:00');
INSERT INTO loans VALUES (18, 7, 19, '2026-01-15', '2026-02-05', NULL, 'lost', '2026-01-15 11:06:00');
INSERT INTO loans VALUES (19, 14, 10, '2026-01-28', '2026-02-18', NULL, 'overdue', '2026-01-28 12:13:00');
INSERT INTO loans VALUES (20, 21, 1, '2026-02-10', '2026-03-03', NULL, 'open', '2026-02-10 13:20:00');
INSERT INTO loans VALUES (21, 28, 12, '2026-02-23', '2026-03-16', NULL, 'open', '2026-02-23 14:27:00');
INSERT INTO loans VALUES (22, 5, 3, '2026-01-11', '2026-02-01', '2026-01-18', 'returned', '2026-01-11 15:34:00');
INSERT INTO loans VALUES (23, 12, 14, '2026-01-24', '2026-02-14', '2026-02-01', 'returned', '2026-01-24 16:41:00');
INSERT INTO loans VALUES (24, 19, 5, '2026-02-06', '2026-02-27', NULL, 'overdue', '2026-02-06 09:48:00');
INSERT INTO loans VALUES (25, 26, 16, '2026-02-19', '2026-03-12', NULL, 'open', '2026-02-19 10:55:00');
INSERT INTO loans VALUES (26, 3, 7, '2026-01-07', '2026-01-28', '2026-01-18', 'returned', '2026-01-07 11:02:00');
INSERT INTO loans VALUES (27, 10, 18, '2026-01-20', '2026-02-10', NULL, 'lost', '2026-01-20 12:09:00');
INSERT INTO loans VALUES (28, 17, 9, '2026-02-02', '2026-02-23', NULL, 'overdue', '2026-02-02 13:16:00');
INSERT INTO loans VALUES (29, 24, 20, '2026-02-15', '2026-03-08', NULL, 'open', '2026-02-15 14:23:00');
INSERT INTO loans VALUES (30, 1, 11, '2026-02-28', '2026-03-21', NULL, 'open', '2026-02-28 15:30:00');
INSERT INTO loans VALUES (31, 8, 2, '2026-01-16', '2026-02-06', '2026-02-01', 'returned', '2026-01-16 16:37:00');
INSERT INTO loans VALUES (32, 15, 13, '2026-01-29', '2026-02-19', NULL, 'overdue', '2026-01-29 09:44:00');
INSERT INTO loans VALUES (33, 22, 4, '2026-02-11', '2026-03-04', NULL, 'open', '2026-02-11 10:51:00');
INSERT INTO loans VALUES (34, 29, 15, '2026-02-24', '2026-03-17', NULL, 'open', '2026-02-24 11:58:00');
INSERT INTO loans VALUES (35, 6, 6, '2026-01-12', '2026-02-02', '2026-02-01', 'returned', '2026-01-12 12:05:00');
INSERT INTO loans VALUES (36, 13, 17, '2026-01-25', '2026-02-15', NULL, 'lost', '2026-01-25 13:12:00');
INSERT INTO loans VALUES (37, 20, 8, '2026-02-07', '2026-02-28', NULL, 'overdue', '2026-02-07 14:19:00');
INSERT INTO loans VALUES (38, 27, 19, '2026-02-20', '2026-03-13', NULL, 'open', '2026-02-20 15:26:00');
INSERT INTO loans VALUES (39, 4, 10, '2026-01-08', '2026-01-29', '2026-01-14', 'returned', '2026-01-08 16:33:00');
INSERT INTO loans VALUES (40, 11, 1, '2026-01-21', '2026-02-11', '2026-01-28', 'returned', '2026-01-21 09:40:00');

INSERT INTO loans_status_transitions VALUES (NULL, 'open');
INSERT INTO loans_status_transitions VALUES ('open', 'returned');
INSERT INTO loans_status_transitions VALUES ('open', 'overdue');
INSERT INTO loans_status_transitions VALUES ('open', 'lost');
INSERT INTO loans_status_transitions VALUES ('overdue', 'returned');
INSERT INTO loans_status_transitions VALUES ('overdue', 'lost');

COMMIT;
